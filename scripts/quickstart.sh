#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job (`tprobe suite`) on embedded
# defaults; the evidence files and out/report.html land in out/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/main-job.sh
