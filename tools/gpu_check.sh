#!/usr/bin/env bash
# CUDA check on a lent GPU machine (the `device` tool): Jittor installed offline from carried
# packages, the fused kernels' CUDA sources built by Jittor, the demo scene trained on the GPU
# with both kernel paths, and peak GPU memory recorded.
#
# Prepare once on the development machine (the folder .whl/ is git-ignored and travels with
# `carry: [".whl"]`):
#   python3 -m pip download --no-deps -d .whl jittor==1.3.11.0 jittor-offline==0.0.7 \
#       configargparse imageio tqdm astunparse six
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#       numpy==1.26.4 pillow
# Then run there:  bash tools/gpu_check.sh   (figures land in $OUT when it is set)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu_check}"
mkdir -p "$OUT"

python3 -m pip install -q --no-index --find-links .whl --target /tmp/site \
    jittor==1.3.11.0 jittor-offline==0.0.7 configargparse imageio tqdm numpy pillow
export PYTHONPATH="/tmp/site:$PWD"
# Offline: nothing may be downloaded. jittor-offline carries oneDNN, cutt and nccl.
export use_cutlass=0 use_nccl=0 PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/gpu.txt"
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$OUT/gpu_memory.csv" &
monitor=$!
trap 'kill $monitor 2>/dev/null || true' EXIT

python3 - <<'PY' | tee "$OUT/cuda_smoke.txt"
import tensorf_jt, jittor as jt
assert jt.flags.use_cuda == 1, "tensorf_jt did not switch Jittor to CUDA"
from tensorf_jt.kernels import use_kernels
import numpy as np, sys
sys.path.insert(0, "tests")
from model_factory import tiny_model, rays_towards_box
model = tiny_model(grid=(14, 13, 12), density_shift=-2.0)
model.shrink(model.updateAlphaMask((14, 13, 12)))
rays = jt.array(rays_towards_box(256, seed=8))
out = {}
for name in ("fused", "reference"):
    with use_kernels(name):
        rgb, depth = model(rays, white_bg=True, is_train=False)
        out[name] = rgb.numpy()
print("use_cuda", jt.flags.use_cuda, "max |rgb fused - reference|", float(np.abs(out["fused"] - out["reference"]).max()))
PY

python3 bench/train_speed.py --config configs/demo.txt --profile_steps 10 | tee "$OUT/demo_speed.txt"
kill $monitor 2>/dev/null || true
echo "peak GPU memory (MiB): $(sort -n "$OUT/gpu_memory.csv" | tail -1)" | tee -a "$OUT/demo_speed.txt"
