#!/usr/bin/env bash
# CUDA check on a lent GPU machine (the `device` tool): Jittor installed offline from carried
# packages, the fused kernels' CUDA sources built by Jittor, a smoke test comparing both
# kernel paths on the GPU, then the demo scene trained on the GPU with each path at the speed
# yardstick's settings (bench/yardstick.txt, the CPU benchmark's), with s/iter, PSNR and peak
# GPU memory.
#
# Prepare once on the development machine (the folder .whl/ is git-ignored and travels with
# `carry: [".whl"]`; the GPU machine's Python is 3.12):
#   python3 -m pip download --no-deps -d .whl jittor==1.3.11.0 jittor-offline==0.0.7 \
#       configargparse astunparse
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl numpy==1.26.4
# Then run there:  bash tools/gpu_check.sh [ITERS]  (default: the config's 1500)   (logs and figures land in $OUT when it is set)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu_check}"
ITERS="${1:-}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1

stamp() { echo "[$(date +%T)] $*"; }
stamp "installing carried packages"
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site .whl/*
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
# Nothing may be downloaded, and TensoRF needs none of cutt, nccl, cutlass, MPI or cuDNN
# (conv_opt=1 makes Jittor set up only cuBLAS and cuRAND).
export use_cutlass=0 use_nccl=0 use_cutt=0 use_mpi=0 conv_opt=1

nvcc_major="$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
if [ "${nvcc_major:-0}" -ge 13 ]; then
  stamp "CUDA $nvcc_major: adapting Jittor 1.3.11 (tools/jittor_cuda13.sh)"
  eval "$(bash tools/jittor_cuda13.sh /tmp/site /tmp/jtnv)"
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"

stamp "first import: Jittor compiles its core with nvcc"
ready=0
for attempt in 1 2 3; do  # a fresh cache makes Jittor ask for a rerun once
  if TENSORF_JT_VERBOSE=1 python3 -c "import tensorf_jt, jittor; jittor.array([1.0]).sync(); print('JITTOR_READY', jittor.flags.use_cuda)" \
      > "$OUT/import_$attempt.log" 2>&1 && grep -q "JITTOR_READY 1" "$OUT/import_$attempt.log"; then
    ready=1; break
  fi
  tail -n 30 "$OUT/import_$attempt.log"
done
[ $ready = 1 ] || { stamp "Jittor did not start on CUDA"; exit 1; }
stamp "Jittor runs on CUDA"

stamp "smoke test: both kernel paths on the GPU"
python3 - <<'PY' | tee "$OUT/cuda_smoke.txt"
import sys
import numpy as np
import tensorf_jt  # noqa: F401
import jittor as jt
from tensorf_jt.kernels import use_kernels
sys.path.insert(0, "tests")
from model_factory import rays_towards_box, tiny_model

assert jt.flags.use_cuda == 1, "tensorf_jt did not switch Jittor to CUDA"
model = tiny_model(grid=(14, 13, 12), density_shift=-2.0)
model.shrink(model.updateAlphaMask((14, 13, 12)))
rays = jt.array(rays_towards_box(256, seed=8))
rgb = {}
for name in ("fused", "reference"):
    with use_kernels(name):
        out, _ = model(rays, white_bg=True, is_train=False)
        rgb[name] = out.numpy()
print("use_cuda", jt.flags.use_cuda, "max |rgb fused - reference|",
      float(np.abs(rgb["fused"] - rgb["reference"]).max()))
PY

for path in fused reference; do
  stamp "training the yardstick on the GPU, --kernels $path"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$OUT/gpu_memory_$path.csv" &
  monitor=$!
  python3 bench/train_speed.py --config bench/yardstick.txt --kernels "$path" --profile_steps 10 \
      ${ITERS:+--iters "$ITERS"} | tee "$OUT/demo_$path.txt"
  kill "$monitor" 2>/dev/null || true
  cp bench/out/train_speed.json "$OUT/demo_$path.json"
  stamp "peak GPU memory, $path (MiB, whole device): $(sort -n "$OUT/gpu_memory_$path.csv" | tail -n 1)"
done
stamp "done"
