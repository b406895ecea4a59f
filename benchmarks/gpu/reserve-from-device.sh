#!/usr/bin/env bash
# Issue 44 item 3 on the GPU host: a co-tenant (a Python process holding a 4 GiB tensor) beside
# `tprobe profile --reserve-from-device` on the tiny model: the budget the reading gives, each
# figure with its source (results.memory_fit.budgets[].device_memory). Output under $OUT.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
TPROBE_BUILD_TARGETS="tprobe tprobe_torch" bash scripts/gpu-build.sh -DTPROBE_WERROR=ON > $OUT/build.txt 2>&1; echo "build $? warnings $(grep -c warning: $OUT/build.txt)"
rm -f /tmp/cotenant.ready
python3 -c "
import torch, time
x = torch.empty(4 * 2**30, dtype=torch.uint8, device='cuda')
open('/tmp/cotenant.ready', 'w').write('1')
time.sleep(120)" &
while [ ! -f /tmp/cotenant.ready ]; do sleep 1; done
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader
timeout 60 build/cuda/src/app/tprobe profile --model gemma4-tiny --random-init --dtype bf16 --widths 256,512,1024 --repeats 1 --rank 4 --alpha 8 --reserve-from-device --edge-search off --json $OUT/rfd.json > $OUT/rfd.txt 2> $OUT/rfd.err; echo "profile exit $?"
tail -3 $OUT/rfd.err
python3 -c "
import json; r = json.load(open('$OUT/rfd.json'))['results']['memory_fit']
for b in r['budgets']: print(json.dumps({k: b[k] for k in ('gpu_memory_bytes','reserve_bytes','budget_bytes','gpu_memory_source','reserve_source','device_memory')}))"
kill %1 2>/dev/null; true
