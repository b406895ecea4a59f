#!/usr/bin/env bash
# Installs tprobe's build dependencies from Debian 12 packages (idempotent; skips apt when present).
# --test adds what the test suite needs beyond the build: chromium, for the report's browser test
# (that test skips itself, saying so, when chromium is absent); clang and python3 for
# scripts/clang-check.sh, CI's second compiler.
set -euo pipefail
pkgs=(build-essential cmake ninja-build git libtorch-dev libcli11-dev libfmt-dev nlohmann-json3-dev
      libgtest-dev zlib1g-dev)
if [ "${1:-}" = "--test" ]; then pkgs+=(chromium clang python3); fi
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
