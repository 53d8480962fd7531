"""Dataset formats. ``dataset_dict`` maps the reference's ``dataset_name`` values to loaders.

``demo`` is ours: the built-in procedural scene, generated into ``datadir`` on first use and
then read by the blender loader (it is written in that layout).
"""
from __future__ import annotations

from tensorf_jt.dataLoader.blender import BlenderDataset
from tensorf_jt.dataLoader.demo_scene import DemoSceneSpec, ensure_generated
from tensorf_jt.dataLoader.ray_batches import RayBatchDataset
from tensorf_jt.errors import ConfigError

dataset_dict = {"blender": BlenderDataset, "demo": BlenderDataset}


def demo_spec(args) -> DemoSceneSpec:
    return DemoSceneSpec(image_size=args.demo_image_size, n_train=args.demo_n_train, n_test=args.demo_n_test)


def prepare_dataset(args) -> bool:
    """Make sure the dataset folder exists; for the demo scene, generate it if missing.

    Returns True when a scene was generated.
    """
    if args.dataset_name not in dataset_dict:
        raise ConfigError(f"dataset_name '{args.dataset_name}' is not supported; "
                          f"choose one of {', '.join(dataset_dict)}.")
    if args.dataset_name == "demo":
        return ensure_generated(args.datadir, demo_spec(args))
    return False


def load_split(args, split: str, is_stack: bool) -> BlenderDataset:
    """One split of the dataset named by ``args``, downsampled by the split's own factor."""
    downsample = args.downsample_train if split == "train" else args.downsample_test
    return dataset_dict[args.dataset_name](args.datadir, split=split, downsample=downsample, is_stack=is_stack)


__all__ = ["BlenderDataset", "RayBatchDataset", "dataset_dict", "demo_spec", "load_split", "prepare_dataset"]
