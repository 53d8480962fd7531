"""Run the original PyTorch TensoRF, unmodified, and time it the way bench/train_speed.py times ours.

    python bench/original_tensorf.py --tensorf_dir ../TensoRF --out result.json -- \\
        --config ../TensoRF/configs/lego.txt --datadir data/scene --n_iters 1500 ...

Everything after ``--`` goes to the original's own flag parser; its ``reconstruction()`` trains
as its ``train.py`` would (same seeds). This harness only observes: every ``Adam.step`` call
is time-stamped (the original synchronises each iteration with ``loss.item()``, so the gap
between two steps is one iteration), and peak GPU memory is read from PyTorch at the end.
Two things are replaced because the machines here cannot provide them: LPIPS (its network
weights are downloaded on first use) reports NaN, and without ``imageio-ffmpeg`` the test
videos are skipped. PSNR and SSIM are the original's own, read from its ``mean.txt``.

Needs a Python with PyTorch and the original's requirements (configargparse, kornia, plyfile,
opencv, scikit-image, tensorboard); nothing of the original is part of this repository.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import one_off_seconds, phase_summary  # noqa: E402  (bench/ is not a package)


def _patch_for_offline(renderer_module) -> list[str]:
    """Replace what needs a download or a missing package; returns what was replaced."""
    replaced = ["LPIPS (reported as NaN: its weights must be downloaded)"]
    renderer_module.rgb_lpips = lambda *args, **kwargs: float("nan")
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        imageio = renderer_module.imageio
        original_mimwrite = imageio.mimwrite

        def mimwrite(path, *args, **kwargs):
            if str(path).endswith(".mp4"):
                return None
            return original_mimwrite(path, *args, **kwargs)

        imageio.mimwrite = mimwrite
        replaced.append("test videos (imageio-ffmpeg is not installed)")
    return replaced


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tensorf_dir", required=True, help="checkout of apchenstu/TensoRF")
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    own, original_argv = parser.parse_known_args()
    if original_argv and original_argv[0] == "--":
        original_argv = original_argv[1:]

    tensorf_dir = str(Path(own.tensorf_dir).resolve())
    sys.path.insert(0, tensorf_dir)
    import numpy as np
    import torch

    import renderer  # the original's modules
    import train as original_train
    from opt import config_parser

    replaced = _patch_for_offline(renderer)
    stamps: list[float] = []
    adam_step = torch.optim.Adam.step

    def timed_step(self, *args, **kwargs):
        result = adam_step(self, *args, **kwargs)
        stamps.append(time.perf_counter())
        return result

    torch.optim.Adam.step = timed_step
    args = config_parser(original_argv)
    torch.set_default_dtype(torch.float32)  # as the original's __main__ does
    torch.manual_seed(20211202)
    np.random.seed(20211202)
    started = time.perf_counter()
    original_train.reconstruction(args)
    wall = time.perf_counter() - started
    if torch.cuda.is_available():
        torch.cuda.synchronize()

    # Iteration i (i >= 1) lasts from the end of step i - 1 to the end of step i; iteration 0
    # has no previous step to measure from.
    step_seconds = [None] + [b - a for a, b in zip(stamps, stamps[1:])]
    phases = phase_summary(step_seconds, args.upsamp_list, args.n_iters)
    logfolder = os.path.join(args.basedir, args.expname)
    metrics = np.atleast_1d(np.loadtxt(os.path.join(logfolder, "imgs_test_all", "mean.txt"))) \
        if args.render_test else np.array([float("nan")])
    result = {
        "implementation": "original (PyTorch)",
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "iterations": len(stamps),
        "loop_s": (stamps[-1] - stamps[0]) if stamps else float("nan"),  # iterations 1 .. n-1
        "setup_s": (stamps[0] - started) if stamps else float("nan"),  # data loading + iteration 0
        "run_s": wall,  # loading, training, test rendering
        "phases": phases,
        "final_grid_s_per_iter": phases[-1]["median_s"] if phases else float("nan"),
        "one_off_s": one_off_seconds(phases),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "peak_gpu_allocated_mb": torch.cuda.max_memory_allocated() / 2 ** 20 if torch.cuda.is_available() else 0.0,
        "peak_gpu_reserved_mb": torch.cuda.max_memory_reserved() / 2 ** 20 if torch.cuda.is_available() else 0.0,
        "test_psnr": float(metrics[0]),
        "test_ssim": float(metrics[1]) if metrics.size > 1 else float("nan"),
        "replaced": replaced,
    }
    Path(own.out).write_text(json.dumps(result, indent=2))
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
