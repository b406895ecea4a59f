#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job on embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/main-job.sh
