#!/usr/bin/env bash
# On the GPU host: configure the `cuda` preset against the installed PyTorch's libtorch and the
# CUPTI of its wheel (the one libtorch itself loads: one CUPTI per process), then build.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .deps/include/fmt/format.h ] || { echo "no .deps/: run scripts/stage-deps.sh here first and carry .deps" >&2; exit 1; }
py=${PYTHON:-python3}
export TPROBE_TORCH_PREFIX=$($py -c 'import torch; print(torch.utils.cmake_prefix_path)')
cupti=$($py - <<'PY'
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
hits = sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib", "libcupti.so*")) +
              glob.glob(os.path.join(site, "nvidia", "cuda_cupti", "lib", "libcupti.so*")))
print(hits[0] if hits else "")
PY
)
export TPROBE_CUPTI_LIBRARY=$cupti
cuda_root=${CUDA_HOME:-/usr/local/cuda}
export TPROBE_CUPTI_INCLUDE_DIR=${TPROBE_CUPTI_INCLUDE_DIR:-$cuda_root/targets/x86_64-linux/include}
echo "libtorch: $TPROBE_TORCH_PREFIX"
echo "CUPTI:    $TPROBE_CUPTI_LIBRARY ($TPROBE_CUPTI_INCLUDE_DIR)"
log=$(mktemp)
if ! cmake --preset cuda -DCUDAToolkit_ROOT="$cuda_root" "$@" >"$log" 2>&1; then
  grep -A12 "CMake Error" "$log" >&2 || tail -40 "$log" >&2
  exit 1
fi
# TPROBE_BUILD_TARGETS="a b" builds only those targets (a lease is short).
if [ -n "${TPROBE_BUILD_TARGETS:-}" ]; then
  for t in $TPROBE_BUILD_TARGETS; do targets+=(--target "$t"); done
  cmake --build build/cuda -j "$(nproc)" "${targets[@]}" ${TPROBE_BUILD_KEEP_GOING:+-- -k 0}
else
  # TPROBE_BUILD_KEEP_GOING=1: build every target that compiles, to see all errors of one lease.
  cmake --build build/cuda -j "$(nproc)" ${TPROBE_BUILD_KEEP_GOING:+-- -k 0}
fi
