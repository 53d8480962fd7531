"""TensorCP, TensorVM, the SH and RGB shaders and NDC sampling against independent numpy code."""
import numpy as np
import pytest
import jittor as jt

from model_factory import AABB, rays_towards_box, tiny_model
from numpy_reference import linear
from tensorf_jt.errors import ConfigError
from tensorf_jt.kernels import KERNELS
from tensorf_jt.models import TensorCP, TensorVM, TensorVMSplit
from tensorf_jt.models.shading import build_shader, sh_basis_degree2
from tensorf_jt.rendering.sampling import sample_along_rays_ndc

SMALL = dict(app_dim=5, shadingMode="MLP_Fea", view_pe=2, fea_pe=2, featureC=8, density_shift=-1.0)


def fibonacci_sphere(n: int) -> np.ndarray:
    index = np.arange(n) + 0.5
    z = 1 - 2 * index / n
    phi = np.pi * (1 + 5 ** 0.5) * index
    r = np.sqrt(1 - z * z)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], 1)


def test_sh_basis_is_orthonormal_on_the_sphere():
    dirs = fibonacci_sphere(20000).astype(np.float32)
    basis = sh_basis_degree2(jt.array(dirs)).numpy().astype(np.float64)
    gram = 4 * np.pi * basis.T @ basis / len(dirs)
    np.testing.assert_allclose(gram, np.eye(9), atol=2e-3)


def test_sh_basis_signs_follow_the_reference_convention():
    x, y, z = 0.48, -0.6, 0.64
    c1 = np.sqrt(3 / (4 * np.pi))
    c2 = 0.5 * np.sqrt(15 / np.pi)
    expected = [0.5 / np.sqrt(np.pi), -c1 * y, c1 * z, -c1 * x, c2 * x * y, -c2 * y * z,
                0.25 * np.sqrt(5 / np.pi) * (2 * z * z - x * x - y * y), -c2 * x * z, 0.5 * c2 * (x * x - y * y)]
    got = sh_basis_degree2(jt.array(np.array([[x, y, z]], np.float32))).numpy()[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


def test_sh_shader_output():
    rng = np.random.default_rng(1)
    features = rng.normal(size=(7, 27)).astype(np.float32)
    dirs = fibonacci_sphere(7).astype(np.float32)
    rgb = build_shader("SH", 27, 0, 0, 0, 8)(jt.zeros((7, 3)), jt.array(dirs), jt.array(features)).numpy()
    basis = sh_basis_degree2(jt.array(dirs)).numpy()
    expected = np.maximum(np.einsum("ncb,nb->nc", features.reshape(7, 3, 9), basis) + 0.5, 0)
    np.testing.assert_allclose(rgb, expected, atol=1e-6)


@pytest.mark.parametrize("mode, app_dim, message", [("SH", 12, "SH needs data_dim_color = 27"),
                                                    ("RGB", 27, "RGB needs data_dim_color = 3"),
                                                    ("Phong", 27, "shadingMode 'Phong' is not supported")])
def test_shader_configuration_errors(mode, app_dim, message):
    with pytest.raises(ConfigError, match=message):
        build_shader(mode, app_dim, 2, 2, 2, 8)


def cp_model(grid=(8, 9, 10)) -> TensorCP:
    return TensorCP(AABB, list(grid), density_n_comp=[4], appearance_n_comp=[6], **SMALL)


def saved_lines(model, kind: str) -> list[np.ndarray]:
    """The three ``kind`` lines in the reference's layout [1, C, L, 1], as a checkpoint holds them."""
    saved = model.reference_state_dict()
    return [saved[f"{kind}.{i}"].numpy() for i in range(3)]


def np_cp_products(model, lines, points):
    rows = []
    for p in points:
        product = 1.0
        for line, vec_id in zip(lines, model.vecMode):
            product = product * linear(line[0, :, :, 0], p[vec_id])
        rows.append(product)
    return np.array(rows)


def test_cp_features_match_numpy():
    model = cp_model()
    assert [line.shape for line in saved_lines(model, "density_line")] == [(1, 4, 10, 1), (1, 4, 9, 1), (1, 4, 8, 1)]
    assert [tuple(line.shape) for line in model.density_line] == [(10, 4), (9, 4), (8, 4)]  # stored [L, C]
    points = np.random.default_rng(0).uniform(-1.05, 1.05, (50, 3)).astype(np.float32)
    density = model.compute_densityfeature(jt.array(points)).numpy()
    np.testing.assert_allclose(density, np_cp_products(model, saved_lines(model, "density_line"), points).sum(1), atol=1e-5)
    app = model.compute_appfeature(jt.array(points)).numpy()
    expected = np_cp_products(model, saved_lines(model, "app_line"), points) @ model.basis_mat.weight.numpy().T
    np.testing.assert_allclose(app, expected, atol=1e-5)


def test_cp_upsample_and_shrink():
    model = cp_model()
    before = saved_lines(model, "density_line")[0]
    model.upsample_volume_grid([15, 17, 19])
    assert model.gridSize == [15, 17, 19]
    assert [line.shape[2] for line in saved_lines(model, "app_line")] == [19, 17, 15]
    np.testing.assert_allclose(saved_lines(model, "density_line")[0][0, :, [0, -1], 0], before[0, :, [0, -1], 0],
                               atol=1e-6)
    units = model.units.copy()
    new_box = np.array([[-0.5, -1.0, 0.0], [1.0, 0.5, 1.5]], np.float32)
    model.shrink(new_box)
    expected = (np.round((new_box[1] - AABB[0]) / units) + 1 - np.round((new_box[0] - AABB[0]) / units)).astype(int)
    assert model.gridSize == list(expected)
    assert [line.shape[0] for line in model.density_line] == [expected[2], expected[1], expected[0]]
    np.testing.assert_allclose(model.aabb, new_box, atol=1e-6)


def test_stacked_vm_computes_what_the_split_vm_computes_on_its_tensors():
    stacked = TensorVM(AABB, [9, 9, 9], density_n_comp=[3], appearance_n_comp=[4], **SMALL)
    assert tuple(stacked.plane_coef.shape) == (3, 7, 9, 9) and tuple(stacked.line_coef.shape) == (3, 7, 9, 1)
    split = TensorVMSplit(AABB, [9, 9, 9], density_n_comp=[3], appearance_n_comp=[4], **SMALL)
    planes, lines = stacked.plane_coef.numpy(), stacked.line_coef.numpy()
    for i in range(3):  # the stacked tensors' slices are the split model's saved (reference) layout
        for name, saved in ((f"app_plane.{i}", planes[i:i + 1, :4]), (f"app_line.{i}", lines[i:i + 1, :4]),
                            (f"density_plane.{i}", planes[i:i + 1, 4:]), (f"density_line.{i}", lines[i:i + 1, 4:])):
            split.state_dict()[name].assign(split.from_reference(name, jt.array(saved)))
    split.basis_mat.weight.assign(stacked.basis_mat.weight)
    points = jt.array(np.random.default_rng(2).uniform(-1, 1, (40, 3)).astype(np.float32))
    for kernels in KERNELS:
        stacked.fused = split.fused = kernels == "fused"
        np.testing.assert_allclose(stacked.compute_densityfeature(points).numpy(),
                                   split.compute_densityfeature(points).numpy(), atol=1e-6)
        np.testing.assert_allclose(stacked.compute_appfeature(points).numpy(),
                                   split.compute_appfeature(points).numpy(), atol=1e-6)


def test_stacked_vm_grid_and_component_rules():
    model = TensorVM(AABB, [9, 11, 12], density_n_comp=[3], appearance_n_comp=[4], **SMALL)
    assert model.gridSize == [9, 9, 9] and not model.crops_grid
    model.upsample_volume_grid([14, 15, 16])
    assert model.gridSize == [14, 14, 14] and tuple(model.plane_coef.shape) == (3, 7, 14, 14)
    with pytest.raises(ConfigError, match="n_lamb_sigma needs the same count on every axis"):
        TensorVM(AABB, [9, 9, 9], density_n_comp=[16, 4, 4], appearance_n_comp=[4], **SMALL)


@pytest.mark.parametrize("model_name", ["TensorCP", "TensorVM"])
def test_every_parameter_receives_gradients(model_name):
    model = tiny_model((10, 10, 10), model_name=model_name, density_n_comp=[3], appearance_n_comp=[3], step_ratio=2.0,
                       **SMALL)
    rgb = model(jt.array(rays_towards_box(64, seed=5)), white_bg=True, perturb=True).rgb
    field = model.field
    loss = jt.sqr(rgb - 0.3).mean() + field.density_L1() + field.TV_loss_density() + field.TV_loss_app() \
        + field.vector_comp_diffs()
    params = field.parameters()
    grads = jt.grad(loss, params)
    for param, grad in zip(params, grads):
        assert np.abs(grad.numpy()).sum() > 0, f"no gradient reaches {tuple(param.shape)}"


def test_ndc_sampling_matches_numpy():
    rng = np.random.default_rng(4)
    rays_o = rng.uniform(-0.5, 0.5, (6, 3)).astype(np.float32)
    rays_o[:, 2] = -1.0
    rays_d = rng.uniform(-0.3, 0.3, (6, 3)).astype(np.float32)
    rays_d[:, 2] = 2.0
    aabb = np.array([[-1.5, -1.67, -1.0], [1.5, 1.67, 1.0]], np.float32)
    xyz, z_vals, inside = sample_along_rays_ndc(jt.array(rays_o), jt.array(rays_d), jt.array(aabb), (0.0, 1.0),
                                                n_samples=16, jitter=None)
    t = np.linspace(0.0, 1.0, 16, dtype=np.float32)
    expected = rays_o[:, None, :] + rays_d[:, None, :] * t[None, :, None]
    np.testing.assert_allclose(z_vals.numpy(), np.broadcast_to(t, (6, 16)), atol=1e-7)
    np.testing.assert_allclose(xyz.numpy(), expected, atol=1e-6)
    np.testing.assert_array_equal(inside.numpy(), ((expected >= aabb[0]) & (expected <= aabb[1])).all(-1))
    _, jittered, _ = sample_along_rays_ndc(jt.array(rays_o), jt.array(rays_d), jt.array(aabb), (0.0, 1.0),
                                           n_samples=16, jitter=jt.rand(1, 16))
    offset = jittered.numpy() - t
    assert np.all(offset >= 0) and np.all(offset < 1 / 16)
    assert np.allclose(offset, offset[:1]), "one set of offsets per batch, as in the reference"


def test_ndc_rendering_composites_with_distances_scaled_by_the_direction_norm():
    model = tiny_model((10, 10, 10), ndc_ray=True, density_n_comp=[2], appearance_n_comp=[3], near_far=(0.0, 1.0),
                       step_ratio=2.0, **SMALL)
    field = model.field
    rays = np.zeros((4, 6), np.float32)
    rays[:, :3] = [[0.0, 0.0, -1.0], [0.2, 0.1, -1.0], [-0.3, 0.0, -1.0], [0.0, -0.2, -1.0]]
    rays[:, 3:] = [[0.1, 0.0, 2.0], [0.0, 0.2, 2.0], [-0.1, 0.1, 2.0], [0.0, 0.0, 2.0]]
    n = 32
    t = np.linspace(0.0, 1.0, n, dtype=np.float32)
    xyz = rays[:, None, :3] + rays[:, None, 3:] * t[None, :, None]
    inside = ((xyz >= AABB[0]) & (xyz <= AABB[1])).all(-1)
    sigma = np.zeros((4, n), np.float32)
    with jt.no_grad():
        normed = field.normalize_coord(jt.array(xyz[inside]))
        sigma[inside] = field.feature2density(field.compute_densityfeature(normed)).numpy()
    norm = np.linalg.norm(rays[:, 3:], axis=1, keepdims=True)
    dists = np.concatenate([np.diff(t)[None].repeat(4, 0), np.zeros((4, 1))], 1) * norm * model.compositing.distance_scale
    alpha = 1 - np.exp(-sigma * dists)
    transmittance = np.cumprod(np.concatenate([np.ones((4, 1)), 1 - alpha + 1e-10], 1), 1)[:, :-1]
    weights = alpha * transmittance
    expected_depth = (weights * t).sum(1) + (1 - weights.sum(1)) * rays[:, -1]
    for kernels in KERNELS:
        model.kernels = kernels
        depth = model(jt.array(rays), white_bg=True, n_samples=n).depth
        np.testing.assert_allclose(depth.numpy(), expected_depth, rtol=1e-4, atol=1e-5)
