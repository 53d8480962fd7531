#!/usr/bin/env bash
# Makes an installed Jittor 1.3.11 build its CUDA code with CUDA 13, then prints the
# environment to export (source it: `. tools/jittor_cuda13.sh SITE_DIR SHIM_DIR`).
#
# Jittor 1.3.11 predates CUDA 13 in three ways, each fixed here without touching the
# system toolkit:
#  - its helper_cuda.h reads cudaDeviceProp.computeMode and .clockRate, which CUDA 13
#    removed (only used to pick the "fastest" GPU and to refuse prohibited ones);
#  - it compiles CUDA with -std=c++14, and CUDA 13's CUB needs C++17: nvcc is reached
#    through a wrapper that raises the dialect;
#  - CUDA 13's CUB dropped the iterators its cub_where op uses (they live in Thrust now);
#  - it looks for headers and libraries next to nvcc (include/, lib64/): the wrapper's
#    folder gets both, gathered from the toolkit and from NVIDIA's pip packages, with the
#    unversioned libX.so names Jittor asks for.
set -euo pipefail
site="${1:?usage: jittor_cuda13.sh SITE_DIR SHIM_DIR}"
shim="${2:?usage: jittor_cuda13.sh SITE_DIR SHIM_DIR}"

# The nvcc on PATH may itself be a wrapper: ask it where its toolkit lives.
probe="$(mktemp --suffix=.cu)"
toolkit="$(nvcc --dryrun -c "$probe" 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n 1)"
rm -f "$probe"
toolkit="$(readlink -f "$toolkit")"
real_nvcc="$toolkit/bin/nvcc"
[ -x "$real_nvcc" ] || { echo "no nvcc found under $toolkit" >&2; exit 1; }

helper="$site/jittor/extern/cuda/inc/helper_cuda.h"
sed -i -e 's/deviceProp\.computeMode == cudaComputeModeProhibited/false/g' \
       -e 's/deviceProp\.computeMode != cudaComputeModeProhibited/true/g' \
       -e 's/deviceProp\.clockRate/1/g' "$helper"

where_op="$site/jittor/extern/cuda/cub/ops/cub_where_op.cc"
grep -q "thrust::counting_iterator" "$where_op" || sed -i \
    -e 's/cub::CountingInputIterator</thrust::counting_iterator</' \
    -e 's/cub::TransformInputIterator<\([^,]*\), \([^,]*\), \([^>]*\)>/thrust::transform_iterator<\2, \3, \1>/' \
    -e 's|#include <cub/cub.cuh>|#include <cub/cub.cuh>\n#include <thrust/iterator/counting_iterator.h>\n#include <thrust/iterator/transform_iterator.h>|' \
    "$where_op"

mkdir -p "$shim/bin" "$shim/include" "$shim/lib64"
cat > "$shim/bin/nvcc" <<EOF
#!/usr/bin/env bash
args=()
for a in "\$@"; do
  case "\$a" in
    -std=c++14) args+=(-std=c++17) ;;
    -std:c++14) args+=(-std:c++17) ;;
    *) args+=("\$a") ;;
  esac
done
exec "$real_nvcc" "\${args[@]}"
EOF
chmod +x "$shim/bin/nvcc"

link_all() {  # link every entry of folder $1 into $2 unless a same-named one is there
  local src="$1" dst="$2" f
  [ -d "$src" ] || return 0
  for f in "$src"/*; do
    [ -e "$f" ] || continue
    [ -e "$dst/$(basename "$f")" ] || ln -s "$f" "$dst/$(basename "$f")"
  done
}
link_all "$toolkit/include" "$shim/include"
link_all "$toolkit/targets/x86_64-linux/include" "$shim/include"
link_all "$toolkit/lib64" "$shim/lib64"
link_all "$toolkit/targets/x86_64-linux/lib" "$shim/lib64"
for pkg in $(python3 -c 'import site, sys; print(" ".join(site.getsitepackages() + sys.path))'); do
  for d in "$pkg"/nvidia/*/ "$pkg"/nvidia/cu13/; do
    link_all "$d/include" "$shim/include"
    link_all "$d/lib" "$shim/lib64"
  done
done
for f in "$shim"/lib64/lib*.so.*; do
  [ -e "$f" ] || continue
  base="${f%%.so.*}.so"
  [ -e "$base" ] || ln -s "$(readlink -f "$f")" "$base"
done

echo "export nvcc_path=$shim/bin/nvcc LD_LIBRARY_PATH=$shim/lib64:\${LD_LIBRARY_PATH:-}"
