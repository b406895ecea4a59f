#!/usr/bin/env bash
# Stages the header-only dependencies and googletest's source from this Debian machine's packages
# into .deps/ (git-ignored), for the GPU host, which has no package archive. Carry .deps with the
# call and configure with the `cuda` preset (scripts/gpu-build.sh does both).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
rm -rf .deps
mkdir -p .deps/include
cp -r /usr/include/CLI /usr/include/fmt /usr/include/nlohmann .deps/include/
cp -r /usr/src/googletest .deps/googletest
du -sh .deps
