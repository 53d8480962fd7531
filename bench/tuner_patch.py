"""What tools/patch_jittor.py costs a cold compile: the training graphs (forward and gradients)
of the three models, every kernel new (a nonce in Jittor's flags), compiled with the installed
Jittor as shipped and as patched, alternating in one invocation.

    python bench/tuner_patch.py [--rounds 3]

It edits the installed Jittor's ``tuner_manager.cc`` in turn (Jittor rebuilds that one file into
its core at the next import) and leaves it patched at the end, whatever happens.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools import patch_jittor  # noqa: E402

COLD_COMPILE = '''
import sys, time
sys.path.insert(0, "tests")
import tensorf_jt.runtime
import jittor as jt
tensorf_jt.runtime.setup()
jt.flags.cc_flags = jt.flags.cc_flags + f" -DTENSORF_JT_BENCH_NONCE={time.time_ns()} "
from model_factory import AABB, rays_towards_box
from tensorf_jt.models import TensorCP, TensorVM, TensorVMSplit
small = dict(app_dim=5, shadingMode="MLP_Fea", view_pe=2, fea_pe=2, featureC=8, density_shift=-1.0)
started = time.time()
for model_class in (TensorCP, TensorVMSplit, TensorVM):
    model = model_class(AABB, [10, 10, 10], density_n_comp=[3], appearance_n_comp=[3], **small)
    rgb, _ = model(jt.array(rays_towards_box(64, seed=5)), white_bg=True, is_train=True)
    loss = jt.sqr(rgb - 0.3).mean() + model.density_L1() + model.TV_loss_density() + model.vector_comp_diffs()
    jt.sync(jt.grad(loss, model.parameters()))
print(f"COLD_COMPILE_S {time.time() - started:.2f}")
'''


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=900)


def timed_compile(revert: bool) -> float:
    patch_jittor.apply(revert=revert)
    run_python("import tensorf_jt, jittor")  # rebuilds the changed file into Jittor's core
    result = run_python(COLD_COMPILE)
    line = next((line for line in result.stdout.splitlines() if line.startswith("COLD_COMPILE_S")), None)
    if result.returncode != 0 or line is None:
        raise SystemExit(f"the compile run failed:\n{result.stderr[-3000:]}")
    return float(line.split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {"as shipped": [], "patched": []}
    try:
        for round_number in range(1, args.rounds + 1):
            for side in seconds:
                seconds[side].append(timed_compile(revert=side == "as shipped"))
                print(f"round {round_number}, {side}: {seconds[side][-1]:.2f} s", flush=True)
    finally:
        patch_jittor.apply()
    for side, values in seconds.items():
        if values:
            print(f"{side}: median {statistics.median(values):.2f} s, min {min(values):.2f}, max {max(values):.2f}")


if __name__ == "__main__":
    main()
