#!/usr/bin/env python3
"""Seconds Jittor takes to compile a new kernel: Jittor's own route, with the precompiled header
(``tensorf_jt/runtime/kernel_headers.py``), and with the header plus the direct build
(``tensorf_jt/runtime/kernel_compile.py``), in alternating rounds so all see the same load.

Each round starts a fresh process per setting that compiles ``--kernels`` new kernels (small
``jt.code`` operators whose source holds a number never used before) and times each.

    python bench/kernel_compile.py --kernels 6 --rounds 3
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, random, sys, time
import tensorf_jt.runtime
import jittor as jt
tensorf_jt.runtime.setup()
x = jt.rand(4096)
x.sync()
tag = random.Random().randrange(10**8)
times = []
for index in range(int(sys.argv[1])):
    body = f"for (int i = 0; i < in0_shape0; i++) @out(i) = @in0(i) * {index + 2}.0f + {tag}.0f;"
    started = time.perf_counter()
    jt.code(x.shape, x.dtype, [x], cpu_src=body).sync()
    times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


# Each setting's switches (tensorf_jt.runtime.kernel_headers and kernel_compile).
SETTINGS = {
    "Jittor's route": {"TENSORF_JT_PCH": "0", "TENSORF_JT_DIRECT_COMPILE": "0"},
    "precompiled header": {"TENSORF_JT_PCH": "1", "TENSORF_JT_DIRECT_COMPILE": "0"},
    "header + direct build": {"TENSORF_JT_PCH": "1", "TENSORF_JT_DIRECT_COMPILE": "1"},
}


def compile_times(kernels: int, switches: dict[str, str]) -> list[float]:
    env = dict(os.environ, **switches, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CHILD, str(kernels)], env=env, capture_output=True, text=True,
                          cwd=ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=6, help="new kernels per process")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "kernel_compile.json"))
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for round_ in range(args.rounds):
        for name in times:
            times[name] += compile_times(args.kernels, SETTINGS[name])
            print(f"round {round_}: {name}: median {statistics.median(times[name]):.2f} s", flush=True)
    report = {name: {"min": min(v), "median": statistics.median(v), "max": max(v), "n": len(v)}
              for name, v in times.items()}
    baseline = report["Jittor's route"]["median"]
    report["speed-up of the median"] = {name: baseline / report[name]["median"] for name in SETTINGS}
    print(json.dumps(report, indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
