#!/usr/bin/env python3
"""Diagnostics: tprobe's per-layer hidden states (tprobe parity --dump-hidden) beside HF's
(output_hidden_states) for the same checkpoint and ids, each against HF fp32.

Usage: compare_hidden.py CHECKPOINT_DIR REFERENCE.safetensors TPROBE_DUMP.safetensors
"""
import sys
import torch
from safetensors.torch import load_file
from transformers import Gemma4ForCausalLM

torch.backends.cuda.matmul.allow_tf32 = False
ckpt, ref_path, dump_path = sys.argv[1:4]
ids = load_file(ref_path)["input_ids"].cuda()
dump = load_file(dump_path)
print("torch allow_bf16_reduced_precision_reduction:",
      torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)
hs = {}
for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
    m = Gemma4ForCausalLM.from_pretrained(ckpt, attn_implementation="eager", dtype=dt).cuda().eval()
    with torch.no_grad():
        out = m(input_ids=ids, output_hidden_states=True)
    hs[name] = [h.float() for h in out.hidden_states]
    del m
n = len(hs["fp32"])
print(f"HF returns {n} hidden states; tprobe dump has {len(dump)}")
for i in range(max(n, len(dump))):
    row = [f"{i:2d}"]
    ref = hs["fp32"][i] if i < n else None
    t = dump.get(f"hidden_{i}")
    if ref is not None:
        rel = lambda a: ((a - ref).norm() / ref.norm()).item()
        row.append(f"HF bf16 {rel(hs['bf16'][i]):.3e}")
        if t is not None and t.shape == ref.shape:
            row.append(f"tprobe bf16 {rel(t.cuda()):.3e}")
            row.append(f"tprobe-vs-HFbf16 {((t.cuda() - hs['bf16'][i]).norm() / hs['bf16'][i].norm()).item():.3e}")
    print("  ".join(row))
