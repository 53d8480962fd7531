#!/usr/bin/env bash
# The CUDA check, on a GPU machine (the `device` tool), in one call of at most ~9 minutes:
#
#   1. installs Jittor from carried packages (as users get it, adapted to CUDA 13 by
#      tools/jittor_cuda13.sh; PATCH_JITTOR=1 adds the opt-in tools/patch_jittor.py) and
#      the wheels the original TensoRF lacks there, and renders lego's scale of the built-in
#      scene (800x800, 100 training + 4 test views, tools/make_scene.py, in 16 processes)
#      while Jittor compiles its core (or restores the cache an earlier call returned);
#   2. trains configs/lego.txt's model (batch 4096, 128^3 -> 300^3) for 800 iterations with the
#      upsampling and alpha-mask schedule compressed tenfold (300^3 from iteration 701), with our
#      fused kernels and then with the original PyTorch TensoRF, and prints one table
#      (bench/train_speed.py): s/iter per grid phase, final-grid median, one-off compile time,
#      peak GPU memory, test PSNR/SSIM; every run's log is kept as it goes;
#   3. if ours trained and at least ROOM_MIN_LEFT seconds are left: the unbounded mode's CUDA path
#      next to the bounded mode's on the built-in room (ROOM, carried; bench/unbounded.py makes
#      it), at the same grid and batch (64^3 -> 200^3, batch 4096, ROOM_ITERS iterations);
#   4. if ours does not train (or with `diagnose`): trains a few iterations with Jittor's
#      default (parallel) op compiler under cuda-gdb / gdb, so that a crash leaves every
#      thread's backtrace, then tools/gpu_bisect.py (serial compiles, full logs) finds the
#      first operator kind that fails, and Jittor's compiled cache is packed for the next call.
#
# Prepare on the development machine (git-ignored folders that travel with the call,
# `carry: [".whl", ".ref", ".jtcache", "bench/out/gpu_room"]`; the GPU machine's Python is 3.12):
#   python3 -m pip download --no-deps -d .whl/jittor jittor==1.3.11.0 configargparse astunparse tensorboardX
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl/jittor numpy==1.26.4
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl/original \
#       kornia kornia_rs plyfile configargparse
#   mkdir -p .ref/TensoRF && git --git-dir=<a clone of apchenstu/TensoRF> archive HEAD | tar -x -C .ref/TensoRF
#   python bench/unbounded.py --size 128 --views 40 --modes --out bench/out/gpu_room   # the room only
#   (.jtcache/ holds the jtcache.tar.* parts an earlier call returned, if any)
# Then there:  bash tools/gpu_check.sh [auto|check|diagnose]
#   auto (default): steps 1-3, then 4 if ours did not train; check: never 4; diagnose: 1 and 4.
# $OUT receives gpu_check.log, logs.tar.gz (every log), the results' JSON (train_speed.json,
# room_unbounded.json, room_bounded.json) and, after a diagnosis or when 40 s are left at the
# end, jtcache.tar.* (Jittor's compiled cache: copy the parts into .jtcache/ for the next call).
# Exit status 0: tensorf_jt trained (whatever became of the original); 1: it did not.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-auto}"
OUT="${OUT:-/tmp/gpu_check_out}"
# Knobs for a dry run of this script's flow on a machine without a GPU (with TENSORF_JT_CPU=1;
# tests/test_gpu_check.py runs it so):
SCRATCH="${SCRATCH:-/tmp}"                  # where the logs, the scene and the training outputs go
PYTHON="${PYTHON:-python3}"                 # the Python that runs Jittor
SKIP_INSTALL="${SKIP_INSTALL:-0}"           # 1: Jittor is already importable by $PYTHON
ORIGINAL_PYTHON="${ORIGINAL_PYTHON:-}"      # a Python with torch for the original (default: the machine's)
ORIGINAL="${ORIGINAL:-.ref/TensoRF}"        # the original's checkout; "none": train ours alone
SCENE_SIZE="${SCENE_SIZE:-800}"
SUPERSAMPLING="${SUPERSAMPLING:-1}"         # anti-aliasing rays per pixel and axis (2: 4x the render time)
PROFILE_STEPS="${PROFILE_STEPS:-10}"        # extra steps timed per stage after training (0: none)
DEADLINE="${DEADLINE:-560}"                 # seconds after the start by which everything must end
ITERS="${ITERS:-800}"                       # training iterations of each side-by-side run
LEGO_FLAGS="${LEGO_FLAGS:-}"                # more training flags for both lego runs (e.g. a grid)
OP_PROFILE_STEPS="${OP_PROFILE_STEPS:-5}"   # steps under Jittor's operator profiler after ours trains
ROOM="${ROOM:-bench/out/gpu_room/room_128_40}"  # the built-in room for the unbounded check
ROOM_ITERS="${ROOM_ITERS:-400}"              # its iterations per mode
ROOM_MIN_LEFT="${ROOM_MIN_LEFT:-90}"        # seconds that must be left to start a room run
ROOM_FLAGS="${ROOM_FLAGS:-}"                # more training flags for both room runs (e.g. a smaller grid)
LOGS="$SCRATCH/gpu_check_logs"
WORK="$SCRATCH/gpu_check_work"
mkdir -p "$OUT" "$LOGS" "$WORK"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
started=$(date +%s)
stamp() { echo "[$(date +%T) +$(( $(date +%s) - started ))s] $*"; }
left() { local s=$(( DEADLINE - ($(date +%s) - started) )); echo $(( s > 1 ? s : 1 )); }
# Lego's schedule compressed tenfold: upsampling at 200..700 (300^3 from 701), masks at 200, 400.
SCHEDULE=(--n_iters "$ITERS" --upsamp_list 200 --upsamp_list 300 --upsamp_list 400 --upsamp_list 550
          --upsamp_list 700 --update_AlphaMask_list 200 --update_AlphaMask_list 400)
# The issue's CPU grid (64^3 -> 200^3) at batch 4096, its schedule compressed to ROOM_ITERS.
q=$(( ROOM_ITERS / 10 ))
ROOM_SCHEDULE=(--n_iters "$ROOM_ITERS" --batch_size 4096 --N_voxel_init 262144 --N_voxel_final 8000000
               --upsamp_list $(( q )) --upsamp_list $(( q * 3 / 2 )) --upsamp_list $(( q * 2 ))
               --upsamp_list $(( q * 11 / 4 )) --upsamp_list $(( q * 7 / 2 ))
               --update_AlphaMask_list $(( q )) --update_AlphaMask_list $(( q * 2 )))
SCENE="$WORK/scene_$SCENE_SIZE"

pack() {  # every log into one archive; with "cache" also Jittor's cache, in parts under 15 MiB
  cp "$OUT/gpu_check.log" "$LOGS/" 2>/dev/null
  { cat /proc/meminfo; ulimit -a; dmesg 2>&1 | tail -n 60; } > "$LOGS/machine_at_end.txt" 2>&1
  tar -czf "$OUT/logs.tar.gz" -C "$(dirname "$LOGS")" "$(basename "$LOGS")"
  if [ "${1:-}" = cache ]; then
    local compress=(gzip -6) suffix=gz size
    if command -v zstd >/dev/null; then compress=(zstd -T0 -10 -q); suffix=zst
    elif command -v xz >/dev/null; then compress=(xz -T0 -6); suffix=xz; fi
    tar -C "$HOME/.cache" -cf - jittor/jt1.3.11 | "${compress[@]}" | split -b 15m -d -a 1 - "$OUT/jtcache.tar.$suffix."
    size=$(cat "$OUT"/jtcache.tar.* | wc -c)
    stamp "Jittor's cache: $(( size / 1048576 )) MiB in $(ls "$OUT"/jtcache.tar.* | wc -l) parts"
    if [ "$size" -gt $(( 58 * 1048576 )) ]; then rm -f "$OUT"/jtcache.tar.*; stamp "too large to return"; fi
  fi
}

SYSTEM_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
SITE=""
if [ "$SKIP_INSTALL" != 1 ]; then
  stamp "installing carried packages"
  "$PYTHON" -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade \
      --target /tmp/site .whl/jittor/* || { stamp "installing Jittor failed"; pack; exit 1; }
  "$PYTHON" -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site_ref \
      .whl/original/* || stamp "installing the original's wheels failed"
  SITE=/tmp/site
  if [ "${PATCH_JITTOR:-0}" = 1 ]; then
    "$PYTHON" tools/patch_jittor.py --site "$SITE" || { stamp "patching Jittor failed"; pack; exit 1; }
  fi
fi
# Nothing may be downloaded, and TensoRF needs none of cutt, nccl, cutlass, MPI or cuDNN
# (conv_opt=1 makes Jittor set up only cuBLAS and cuRAND).
export use_cutlass=0 use_nccl=0 use_cutt=0 use_mpi=0 conv_opt=1 PYTHONUNBUFFERED=1
nvcc_major="$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
if [ -n "$SITE" ] && [ "${nvcc_major:-0}" -ge 13 ]; then
  stamp "CUDA $nvcc_major: adapting Jittor 1.3.11 (tools/jittor_cuda13.sh)"
  eval "$(bash tools/jittor_cuda13.sh "$SITE" /tmp/jtnv)"
  ls -l /tmp/jtnv/lib64 > "$LOGS/shim_libraries.txt"
fi
export PYTHONPATH="${SITE:+$SITE:}$PWD"
if [ -z "$ORIGINAL_PYTHON" ]; then  # the machine's own Python, with its own CUDA libraries
  ORIGINAL_PYTHON="$WORK/original_python"
  printf '#!/usr/bin/env bash\nexport LD_LIBRARY_PATH="%s" PYTHONPATH=/tmp/site_ref\nexec python3 "$@"\n' \
      "$SYSTEM_LD_LIBRARY_PATH" > "$ORIGINAL_PYTHON"
  chmod +x "$ORIGINAL_PYTHON"
fi

parts=(.jtcache/jtcache.tar.*)
if [ -e "${parts[0]}" ] && [ "${TENSORF_JT_CPU:-0}" != 1 ]; then  # a GPU machine's cache
  case "${parts[0]}" in *.zst.*) decompress=(zstd -d -q) ;; *.xz.*) decompress=(xz -d) ;; *) decompress=(gzip -d) ;; esac
  mkdir -p "$HOME/.cache" && cat "${parts[@]}" | "${decompress[@]}" | tar -x -C "$HOME/.cache" \
    && stamp "restored Jittor's cache from an earlier call"
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$LOGS/gpu.txt" 2>&1; cat "$LOGS/gpu.txt"
if [ "$MODE" != diagnose ]; then
  stamp "rendering the ${SCENE_SIZE}x$SCENE_SIZE scene in the background"
  "$PYTHON" tools/make_scene.py "$SCENE" --size "$SCENE_SIZE" --n_train 100 --n_val 0 --n_test 4 \
      --supersampling "$SUPERSAMPLING" --workers 16 > "$LOGS/scene.log" 2>&1 &
  scene_job=$!
fi

stamp "first import: Jittor compiles its core"
ready=0
for attempt in 1 2 3; do  # a fresh cache makes Jittor ask for a rerun once
  if TENSORF_JT_VERBOSE=1 "$PYTHON" -c "import tensorf_jt, jittor; jittor.array([1.0]).sync(); print('JITTOR_READY', jittor.flags.use_cuda)" \
      > "$LOGS/import_$attempt.log" 2>&1 && grep -q "JITTOR_READY" "$LOGS/import_$attempt.log"; then
    ready=1; break
  fi
  tail -n 20 "$LOGS/import_$attempt.log"
done
[ $ready = 1 ] || { stamp "Jittor did not start"; pack; exit 1; }
stamp "Jittor is ready: $(grep JITTOR_READY "$LOGS/import_$attempt.log") (1: on CUDA)"

diagnose() {  # why training fails: the crash under a debugger, then one operator kind at a time
  stamp "a few training iterations with Jittor's default (parallel) op compiler, under a debugger ($(left) s left)"
  timeout "$(( $(left) > 240 ? 200 : $(left) / 2 ))" "$PYTHON" tools/gpu_bisect.py --only trainer_fused --parallel \
      --under-debugger --probe-timeout 180 --out "$LOGS/reproduce"
  stamp "bisect: one operator kind at a time, serial compiles, full logs ($(left) s left)"
  timeout "$(( $(left) > 60 ? $(left) - 40 : 20 ))" "$PYTHON" tools/gpu_bisect.py --probe-timeout 150 \
      --budget "$(( $(left) > 120 ? $(left) - 100 : 20 ))" --debugger --out "$LOGS/bisect"
  pack cache
}

room_check() {  # the unbounded mode's CUDA path next to the bounded mode's, same grid and batch
  if [ ! -d "$ROOM" ]; then stamp "no room scene at $ROOM: the unbounded check is skipped"; return; fi
  sed 's/^dataset_name = .*/dataset_name = own_data/' configs/demo_room.txt > "$WORK/room.txt"
  local mode unbounded
  for mode in unbounded bounded; do
    unbounded=0; [ $mode = unbounded ] && unbounded=1
    if [ "$(left)" -lt "$ROOM_MIN_LEFT" ]; then stamp "no time left for the room in $mode mode"; return; fi
    stamp "the built-in room ($ROOM), $mode mode ($(left) s left)"
    timeout "$(( $(left) - 15 ))" "$PYTHON" bench/train_speed.py --config "$WORK/room.txt" --datadir "$ROOM" \
        --kernels fused --profile_steps 0 --basedir "$WORK/room_runs_$mode" --out "$OUT/room_$mode.json" \
        --logs "$LOGS/room_$mode" -- --unbounded $unbounded "${ROOM_SCHEDULE[@]}" $ROOM_FLAGS 2>&1 \
        | tee "$LOGS/room_$mode.log"
    pkill -f "train_speed.py --worker"
  done
}

if [ "$MODE" = diagnose ]; then
  diagnose
else
  [ -n "${scene_job:-}" ] && { wait "$scene_job"; cat "$LOGS/scene.log"; }
  stamp "lego's model at lego's scale: tensorf_jt (fused kernels), then the original PyTorch TensoRF ($(left) s left)"
  original=(--original "$ORIGINAL" --original_python "$ORIGINAL_PYTHON")
  [ "$ORIGINAL" = none ] && original=()
  timeout "$(left)" "$PYTHON" bench/train_speed.py --config configs/lego.txt --datadir "$SCENE" --kernels fused \
      --profile_steps "$PROFILE_STEPS" --op_profile_steps "$OP_PROFILE_STEPS" "${original[@]}" --stop_on_failure --basedir "$WORK/runs" \
      --out "$OUT/train_speed.json" --logs "$LOGS/train_speed" -- "${SCHEDULE[@]}" $LEGO_FLAGS 2>&1 | tee "$LOGS/train_speed.log"
  pkill -f "train_speed.py --worker"; pkill -f original_tensorf.py  # whatever the deadline cut short
  trained=0; grep -q '"tensorf_jt' "$OUT/train_speed.json" 2>/dev/null && trained=1
  if [ "$MODE" = auto ] && [ $trained = 0 ]; then
    diagnose  # ours did not train
  else
    [ $trained = 1 ] && room_check
    if [ "${TENSORF_JT_CPU:-0}" != 1 ] && [ "$(left)" -gt 40 ]; then
      pack cache  # the next call skips most operator compiles
    else
      pack
    fi
  fi
fi
stamp "done"
[ "${trained:-0}" = 1 ]  # the exit status: whether tensorf_jt trained
