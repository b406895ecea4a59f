#!/usr/bin/env bash
# Installs tprobe's build dependencies from Debian 12 packages (idempotent; skips apt when present).
# Without arguments (README command 1): what the `release` build of tprobe and its torch module
# needs. --test (README command 2) adds what the test suite needs beyond that: libgtest-dev;
# chromium, for the report's browser test (that test skips itself, saying so, when chromium is
# absent); clang and python3 for scripts/clang-check.sh, CI's second compiler; file, which cpack's
# dpkg-shlibdeps step needs (the Debian package test, tests/install/package_deb.cmake).
set -euo pipefail
pkgs=(build-essential cmake ninja-build git libtorch-dev libcli11-dev libfmt-dev nlohmann-json3-dev
      zlib1g-dev libssl-dev)
if [ "${1:-}" = "--test" ]; then pkgs+=(libgtest-dev chromium clang python3 file); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
