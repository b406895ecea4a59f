#!/usr/bin/env bash
# README command 2 (and .ci/run): install dependencies, build with -Werror, run every test, then
# the unit and CLI tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DTPROBE_WERROR=ON
ctest --preset cpu -j "$(nproc)"
# Unit and CLI tests under ASan + UBSan (docs/fuzzing.md).
scripts/test-asan.sh -DTPROBE_WERROR=ON
