#!/usr/bin/env bash
# README command 2 (and .ci/run): install dependencies, build with -Werror, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
scripts/build.sh -DTPROBE_WERROR=ON
ctest --preset cpu -j "$(nproc)"
