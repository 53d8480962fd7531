#!/usr/bin/env bash
# Training speed of two commits side by side: bench/train_speed.py (fused kernels) in a
# worktree of each, alternating OLD, NEW, OLD, NEW, ... in one invocation, so that both see
# the same machine load. Prints each run's table row; results under $OUT.
#
#   bash bench/commit_ab.sh OLD NEW [ROUNDS] [-- train_speed.py flags]
#   bash bench/commit_ab.sh bed9d6b HEAD 2 -- --iters 600 --datadir /tmp/demo_scene
#
# Both commits run with this checkout's virtual environment (.venv). Each commit's own
# bench/train_speed.py is used, so each is measured as that commit measures itself.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=${1:?old commit}; NEW=${2:?new commit}; ROUNDS=${3:-2}
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
PY=${PY:-$ROOT/.venv/bin/python}
OUT=${OUT:-$ROOT/bench/out/commit_ab}
mkdir -p "$OUT"
for side in old new; do
  commit=$OLD; [ $side = new ] && commit=$NEW
  rm -rf "$OUT/tree_$side"
  git -C "$ROOT" worktree add --detach --force "$OUT/tree_$side" "$commit" > /dev/null
done
trap 'for side in old new; do git -C "$ROOT" worktree remove --force "$OUT/tree_$side" 2> /dev/null || true; done' EXIT
for round in $(seq "$ROUNDS"); do
  for side in old new; do
    (cd "$OUT/tree_$side" && "$PY" bench/train_speed.py --kernels fused --profile_steps 0 \
        --basedir "$OUT/runs_$side$round" --out "$OUT/$side$round.json" --logs "$OUT/logs_$side$round" "$@" \
        > "$OUT/$side$round.txt" 2>&1)
    echo "round $round, $side ($(git -C "$ROOT" rev-parse --short "$([ $side = old ] && echo "$OLD" || echo "$NEW")")):"
    grep "tensorf_jt (fused)" "$OUT/$side$round.txt"
  done
done
