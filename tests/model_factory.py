"""Small models for tests: a few components on a coarse grid, cheap to build and run."""
import numpy as np

from tensorf_jt.models import TensoRFModel, compose

AABB = np.array([[-1.5, -1.5, -1.5], [1.5, 1.5, 1.5]], np.float32)


def tiny_model(grid=(8, 9, 10), density_shift=-10.0, aabb=AABB, kernels="fused", ndc_ray=False, model_name="TensorVMSplit",
               **overrides) -> TensoRFModel:
    """A TensorVMSplit field (unless ``model_name`` says otherwise) in the sampler its kwargs
    choose (``overrides`` may add an unbounded model's ``scene_contraction`` and so on)."""
    settings = dict(aabb=aabb, gridSize=list(grid), density_n_comp=[2, 3, 2], appearance_n_comp=[3, 2, 3], app_dim=5,
                    shadingMode="MLP_Fea", view_pe=2, fea_pe=2, featureC=8, step_ratio=0.5,
                    density_shift=density_shift, alphaMask_thres=1e-3)
    settings.update(overrides)
    return compose(model_name, settings, kernels, ndc_ray)


def rays_towards_box(n: int, seed: int = 0) -> np.ndarray:
    """Rays [n, 6] from a ring of cameras at radius 4 aimed near the origin."""
    rng = np.random.default_rng(seed)
    azimuth = rng.uniform(0, 2 * np.pi, n)
    origins = np.stack([4 * np.cos(azimuth), 4 * np.sin(azimuth), rng.uniform(-1, 1, n)], 1)
    targets = rng.uniform(-0.8, 0.8, (n, 3))
    directions = targets - origins
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return np.concatenate([origins, directions], 1).astype(np.float32)
