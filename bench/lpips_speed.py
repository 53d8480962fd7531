"""Seconds per LPIPS score of an 800x800 image pair, for each network, and the largest difference
from the official lpips 0.1.4 on the test fixture's pairs.

    python bench/lpips_speed.py [--size 800] [--repeats 3]

The first call of each network compiles its kernels; the figures are the medians of the
calls after it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=800)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import numpy as np
    import tensorf_jt.runtime  # configures Jittor before it is imported
    import jittor as jt
    tensorf_jt.runtime.setup()
    from lpips_pairs import image_pairs
    from tensorf_jt.evaluation.lpips import lpips_distance

    rng = np.random.default_rng(0)
    image = rng.random((args.size, args.size, 3)).astype(np.float32)
    reference = np.clip(image + rng.normal(0, 0.05, image.shape), 0, 1).astype(np.float32)
    fixture = json.loads((ROOT / "tests" / "fixtures" / "lpips_values.json").read_text())
    pairs = image_pairs()
    print(f"device: {'CUDA' if jt.flags.use_cuda else 'CPU'}")
    for net in ("alex", "vgg"):
        lpips_distance(image, reference, net)  # builds the network and compiles its kernels
        times = []
        for _ in range(args.repeats):
            tick = time.perf_counter()
            lpips_distance(image, reference, net)
            times.append(time.perf_counter() - tick)
        worst = max(abs(lpips_distance(a, b, net) - expected[net])
                    for (_, a, b), expected in zip(pairs, fixture["pairs"]))
        print(f"LPIPS-{net}: {statistics.median(times):.2f} s per {args.size}x{args.size} pair "
              f"(min {min(times):.2f}, max {max(times):.2f}); largest difference from lpips 0.1.4: {worst:.2e}")


if __name__ == "__main__":
    main()
