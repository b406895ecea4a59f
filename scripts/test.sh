#!/usr/bin/env bash
# README command 2 (and .ci/run): install dependencies, build with -Werror — every torch-free
# translation unit under AddressSanitizer + UndefinedBehaviorSanitizer (the `asan` preset) — and
# run every test: unit, CLI, model, report browser test (docs/fuzzing.md says why one build); and
# clang -fsyntax-only -Werror over the torch-free code (scripts/clang-check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
cmake --preset asan -DTPROBE_WERROR=ON "$@" >/dev/null
cmake --build build/asan -j "$(nproc)"
# The second compiler: clang parses the torch-free translation units with -Werror (about a minute).
scripts/clang-check.sh build/asan
# ctest starts the slowest tests first by the costs of its last run; a fresh build has none, so it
# gets tests/ctest-cost-seed.txt (the slow tests' seconds on the 2-core machine, a scheduling hint
# only): without it a two-minute test can start last and lengthen the run by its own length.
if [ ! -s build/asan/Testing/Temporary/CTestCostData.txt ]; then
  mkdir -p build/asan/Testing/Temporary
  cp tests/ctest-cost-seed.txt build/asan/Testing/Temporary/CTestCostData.txt
fi
ctest --preset asan -j "$(nproc)"
