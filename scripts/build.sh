#!/usr/bin/env bash
# Configures (cpu preset) and builds tprobe. Extra arguments go to the configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset cpu "$@" >/dev/null
cmake --build build/cpu -j "$(nproc)"
