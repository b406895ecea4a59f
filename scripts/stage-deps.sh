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
# zlib (gzip datasets): headers and the static library, used only where the host has no zlib dev.
mkdir -p .deps/zlib/include .deps/zlib/lib
cp /usr/include/zlib.h /usr/include/zconf.h .deps/zlib/include/
cp "/usr/lib/$(gcc -print-multiarch)/libz.a" .deps/zlib/lib/
# libcrypto (SHA-256 of profile --dataset's batches): OpenSSL 3.0's headers and the static library.
mkdir -p .deps/openssl/include .deps/openssl/lib
cp -r /usr/include/openssl .deps/openssl/include/
cp -r "/usr/include/$(gcc -print-multiarch)/openssl/." .deps/openssl/include/openssl/
cp "/usr/lib/$(gcc -print-multiarch)/libcrypto.a" .deps/openssl/lib/
du -sh .deps
