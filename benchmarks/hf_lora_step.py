#!/usr/bin/env python3
"""The Hugging Face + PEFT LoRA step tprobe's step is compared with (docs/benchmarks.md).

Gemma4ForCausalLM with the 26B-A4B text shapes, random weights created directly on the GPU in
bf16, LoRA r64 (alpha 128, dropout 0) on q,k,v,o,gate,up,down, reentrant gradient checkpointing
with enable_input_require_grads, and a sequence-chunked softcapped CE (per-chunk checkpoint, so
the 262,144-wide logits are never whole). Batch 2, one warm-up then --reps timed steps per width.

--pad-fraction F adds one padded point at the widest width: the last row keeps (1 - F) of its
tokens, the rest is right-padding passed as attention_mask (HF then builds explicit padding
masks on every layer) and ignored by the loss (labels -100). --trace-out PATH writes a
torch.profiler (Kineto) trace of one step at the first width, for `tprobe kernels`. --hf-loss
makes the step the one most users write, `model(input_ids=..., labels=...).loss.backward()`
(transformers' own loss over the whole logits), with --checkpointing non-reentrant the way torch
recommends.

--optimizer adamw (the default, as tprobe's `--optimizer`) ends every step as Trainer does with
TrainingArguments(optim="adamw_torch"): torch.optim.AdamW on the trainable (LoRA) parameters, fp32
like them, foreach left to torch's default, lr 5e-5, betas (0.9, 0.999), eps 1e-8, weight decay 0
(TrainingArguments' defaults), then model.zero_grad(set_to_none=True); the peak is then measured
over the steps after the warm-up step, the first optimizer step, so that AdamW's two moments per
parameter are resident in it. --optimizer none is the forward + backward alone (the peak over every
step, warm-up included, as before the option existed); both start each step with no gradients.

--points BxW ... runs those batch x width points instead; --cap-gib G caps the caching allocator
at G GiB (set_per_process_memory_fraction), as tprobe's edge search caps it, so a point past the
budget is an "oom" outcome (one warm-up + --reps steps: with --reps 2, three consecutive steps).

Usage: hf_lora_step.py --attn sdpa --seq 2048 8192 [--pad-fraction 0.5] [--profile]
                       [--optimizer adamw|none] [--trace-out T.json] [--json OUT]
                       [--points 2x8192 2x9216 --cap-gib 72]
"""
import argparse
import gc
import json
import os
import time

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as cp

torch.backends.cuda.matmul.allow_tf32 = False


def config_26b(attn):
    import transformers
    kw = dict(hidden_size=2816, num_hidden_layers=30, intermediate_size=2112, num_attention_heads=16,
              num_key_value_heads=8, head_dim=256, global_head_dim=512, num_global_key_value_heads=2,
              attention_k_eq_v=True,
              layer_types=["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(30)],
              sliding_window=1024, vocab_size=262144, enable_moe_block=True, num_experts=128,
              top_k_experts=8, moe_intermediate_size=704, hidden_size_per_layer_input=0,
              num_kv_shared_layers=0, final_logit_softcapping=30.0, tie_word_embeddings=True,
              rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=262144,
              rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": {"rope_type": "proportional",
                                                  "partial_rotary_factor": 0.25, "rope_theta": 1e6}})
    cfg = transformers.Gemma4TextConfig(**kw)
    cfg._attn_implementation = attn
    return cfg


def chunked_ce_loss(hidden, weight, labels, cap, chunk):
    def chunk_loss(h, lab):
        logits = h @ weight.t()
        logits = torch.tanh(logits / cap) * cap
        return F.cross_entropy(logits.float(), lab, ignore_index=-100, reduction="sum")
    h = hidden.reshape(-1, hidden.shape[-1])
    lab = labels.reshape(-1)
    total = h.new_zeros((), dtype=torch.float32)
    for s in range(0, h.shape[0], chunk):
        total = total + cp.checkpoint(chunk_loss, h[s:s + chunk], lab[s:s + chunk], use_reentrant=False)
    return total / (lab != -100).sum()


def routing_shares(experts, k, routing):
    """Each expert's share (≤ 1, summing to k): k/E balanced; Zipf by water-filling."""
    if routing == "balanced":
        return [k / experts] * experts
    s = float(routing.split(":")[1])
    w = [(e + 1) ** -s for e in range(experts)]
    capped = 0
    while True:
        scale = (k - capped) / sum(w[capped:])
        if capped < experts and w[capped] * scale > 1:
            capped += 1
            continue
        return [1.0 if e < capped else w[e] * scale for e in range(experts)]


def forced_assignment(tokens, experts, k, routing):
    """[tokens, k] expert ids: round(tokens·share) per expert (largest remainder, ties to the lower
    expert), each expert's run of slots wrapping over the tokens (slot i to token i mod tokens)."""
    import math
    share = routing_shares(experts, k, routing)
    want = [tokens * x for x in share]
    quota = [min(tokens, math.floor(v)) for v in want]
    order = sorted(range(experts), key=lambda e: -(want[e] - quota[e]))  # stable: lower first
    i = 0
    while sum(quota) < tokens * k:
        e = order[i % experts]
        if quota[e] < tokens:
            quota[e] += 1
        i += 1
    out = [[0] * k for _ in range(tokens)]
    slot = 0
    for e in range(experts):
        for _ in range(quota[e]):
            out[slot % tokens][slot // tokens] = e
            slot += 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("--seq", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=4096)
    ap.add_argument("--profile", action="store_true", help="kernel table of one step at the first width")
    ap.add_argument("--pad-fraction", type=float, default=None,
                    help="add a padded point at the widest width, last row padded by this fraction")
    ap.add_argument("--trace-out", help="torch.profiler trace of one step at the first width")
    ap.add_argument("--with-stack", action="store_true",
                    help="record the trace with with_stack=True (module events for tprobe kernels)")
    ap.add_argument("--profile-memory", action="store_true",
                    help="record the trace with profile_memory=True ([memory] events)")
    ap.add_argument("--checkpointing", choices=["reentrant", "non-reentrant"], default="reentrant",
                    help="gradient checkpointing's use_reentrant (default: reentrant, as before)")
    ap.add_argument("--ones-mask", action="store_true",
                    help="pass an all-ones attention_mask on unpadded points")
    ap.add_argument("--memory-sites", action="store_true",
                    help="after the timed steps of each width, one step under "
                         "torch.cuda.memory._record_memory_history: the blocks alive at its peak "
                         "by phase and by the model code's frame (hf_memory_sites.py)")
    ap.add_argument("--top", type=int, default=25, help="sites printed with --memory-sites")
    ap.add_argument("--hf-loss", action="store_true",
                    help="the step a user writes: model(input_ids=..., labels=...).loss.backward() "
                         "(transformers' own loss over the whole logits) instead of the chunked CE")
    ap.add_argument("--optimizer", choices=["adamw", "none"], default="adamw",
                    help="the optimizer each step ends with: torch.optim.AdamW on the LoRA "
                         "parameters (Trainer's optim=\"adamw_torch\"), or none")
    ap.add_argument("--points", nargs="+", metavar="BxW",
                    help="run these batch x width points instead of --batch x --seq (the edge "
                         "search's measured edge and the step past it)")
    ap.add_argument("--cap-gib", type=float,
                    help="cap the caching allocator at this many GiB "
                         "(torch.cuda.set_per_process_memory_fraction of the card), as tprobe's "
                         "edge search caps it: a point past it is an OOM outcome")
    ap.add_argument("--routing", nargs="+", default=["computed"],
                    help="computed | balanced | zipf:S, each run over every point: a forward hook "
                         "on every Gemma4TextRouter forces tprobe's assignment "
                         "(core/step/routing.cpp, written again below), the gates kept")
    ap.add_argument("--json")
    a = ap.parse_args()
    import transformers
    import peft
    from transformers import Gemma4ForCausalLM
    if a.cap_gib is not None:
        card = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, a.cap_gib * 2**30 / card))
    t0 = time.time()
    cfg = config_26b(a.attn)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = Gemma4ForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    model.config.use_cache = False
    lcfg = peft.LoraConfig(r=64, lora_alpha=128, lora_dropout=0.0, task_type="CAUSAL_LM",
                           target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                           "up_proj", "down_proj"])
    model.gradient_checkpointing_enable(
        gradient_checkpointing_kwargs={"use_reentrant": a.checkpointing == "reentrant"})
    model.enable_input_require_grads()
    model = peft.get_peft_model(model, lcfg)
    torch.cuda.synchronize()
    init_s = time.time() - t0
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    print(f"HF transformers {transformers.__version__} peft {peft.__version__} torch {torch.__version__}: "
          f"init {init_s:.1f} s, frozen {total}, trainable {trainable}, "
          f"experts={getattr(model.config, '_experts_implementation', '?')}")
    decoder = model.base_model.model.model
    weight = decoder.embed_tokens.weight
    current = {"routing": "computed", "cache": {}}

    def force(mod, inp, out):
        if current["routing"] == "computed":
            return out
        probs, w, idx = out
        key = (idx.shape[0], idx.shape[1])
        if key not in current["cache"]:
            current["cache"][key] = torch.tensor(
                forced_assignment(idx.shape[0], probs.shape[-1], idx.shape[1], current["routing"]),
                device=idx.device, dtype=idx.dtype)
        forced = current["cache"][key]
        scale = mod.per_expert_scale
        return probs, w / scale[idx] * scale[forced], forced

    routers = [m for m in model.modules() if type(m).__name__.endswith("Router")]
    hooks = [m.register_forward_hook(force) for m in routers]
    print(f"routing hook on {len(hooks)} routers ({type(routers[0]).__name__ if routers else '-'})")
    optimizer = None
    if a.optimizer == "adamw":
        params = [p for p in model.parameters() if p.requires_grad]
        assert all(p.dtype == torch.float32 for p in params), "PEFT keeps the adapters in fp32"
        optimizer = torch.optim.AdamW(params, lr=5e-5, betas=(0.9, 0.999), eps=1e-8,
                                      weight_decay=0.0)

    def end_step():
        # Trainer: optimizer.step(), then model.zero_grad(set_to_none=True)
        if optimizer is not None:
            optimizer.step()
        model.zero_grad(set_to_none=True)

    out = {"attn": a.attn, "init_s": init_s, "trainable_parameters": trainable,
           "frozen_parameters": total, "transformers": transformers.__version__,
           "peft": peft.__version__, "torch": torch.__version__, "checkpointing": a.checkpointing,
           "ones_mask": a.ones_mask, "hf_loss": a.hf_loss, "optimizer": a.optimizer,
           "cap_gib": a.cap_gib, "widths": []}

    def step(ids, lengths=None, marks=None):
        labels = torch.full_like(ids, -100)
        labels[:, :-1] = ids[:, 1:]
        mask = torch.ones_like(ids) if a.ones_mask else None
        if lengths is not None:
            pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
            real = pos < torch.tensor(lengths, device=ids.device).unsqueeze(1)
            mask = real.long()
            # a row of L real tokens has L - 1 targets: positions L - 1 and later carry no label
            labels[pos >= (torch.tensor(lengths, device=ids.device).unsqueeze(1) - 1)] = -100
        if a.hf_loss:
            hf_labels = ids.clone()
            if lengths is not None:
                hf_labels[pos >= torch.tensor(lengths, device=ids.device).unsqueeze(1)] = -100
            loss = model(input_ids=ids, attention_mask=mask, labels=hf_labels, use_cache=False).loss
            loss.backward()
            end_step()
            return loss
        hidden = decoder(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
        if marks is not None:
            torch.cuda.synchronize()
            marks.append(time.time())
        loss = chunked_ce_loss(hidden, weight, labels, 30.0, a.chunk)
        if marks is not None:
            torch.cuda.synchronize()
            marks.append(time.time())
        loss.backward()
        end_step()
        return loss

    points = [(a.batch, seq, None) for seq in a.seq]
    if a.points:
        points = [(int(p.split("x")[0]), int(p.split("x")[1]), None) for p in a.points]
    if a.pad_fraction is not None:
        widest = max(a.seq)
        lengths = [widest] * a.batch
        lengths[-1] = max(2, round(widest * (1.0 - a.pad_fraction)))
        points.append((a.batch, widest, lengths))
    runs = [(routing, i, p) for routing in a.routing for i, p in enumerate(points)]
    for routing, i, (batch, seq, lengths) in runs:
        current["routing"] = routing
        current["cache"] = {}
        g = torch.Generator(device="cuda").manual_seed(seq)
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda", generator=g)
        if lengths is not None:
            for b, n in enumerate(lengths):
                ids[b, n:] = cfg.pad_token_id if cfg.pad_token_id is not None else 0
        w = {"batch": batch, "seq": seq, "lengths": lengths, "routing": routing}
        try:
            torch.cuda.reset_peak_memory_stats()
            times = []
            for r in range(a.reps + 1):
                torch.cuda.synchronize()
                s = time.time()
                loss = step(ids, lengths)
                torch.cuda.synchronize()
                if r > 0:
                    times.append(time.time() - s)
                elif optimizer is not None:
                    # the peak of the steps after the optimizer's first, its moments resident
                    torch.cuda.reset_peak_memory_stats()
            w.update(outcome="ok", step_s=times, best_step_s=min(times), loss=loss.item(),
                     peak_allocated_bytes=torch.cuda.max_memory_allocated(),
                     peak_reserved_bytes=torch.cuda.max_memory_reserved())
            if a.memory_sites:
                from hf_memory_sites import record_sites
                w["memory"] = record_sites(lambda marks: step(ids, lengths, marks), a.top)
            tag = f" lengths {lengths}" if lengths else ""
            print(f"HF {a.attn} {routing} {batch}x{seq}{tag}: best {min(times):.3f} s, "
                  f"peak {w['peak_allocated_bytes'] / 2**30:.2f} GiB")
            if a.trace_out and i == 0:
                from torch.profiler import profile, ProfilerActivity
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                             with_stack=a.with_stack, profile_memory=a.profile_memory) as prof:
                    step(ids)
                    torch.cuda.synchronize()
                prof.export_chrome_trace(a.trace_out)
                print(f"HF trace of one {batch}x{seq} step: {a.trace_out}")
            if a.profile and i == 0:
                from torch.profiler import profile, ProfilerActivity
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    step(ids)
                    torch.cuda.synchronize()
                rows = {}
                for ev in prof.events():
                    if ev.device_type.name == "CUDA":
                        rows[ev.name] = rows.get(ev.name, 0) + ev.device_time
                top = sorted(rows.items(), key=lambda kv: -kv[1])[:15]
                print("HF kernel table (device time, one step):")
                for name, us in top:
                    print(f"  {us / 1e3:10.1f} ms  {name[:110]}")
                w["kernels_ms"] = {n: us / 1e3 for n, us in top}
        except torch.OutOfMemoryError as e:
            w.update(outcome="oom", message=str(e)[:300])
            print(f"HF {a.attn} {batch}x{seq}: OOM")
            model.zero_grad(set_to_none=True)
            gc.collect()
            torch.cuda.empty_cache()
        out["widths"].append(w)
        if a.json:  # after every point, so a timeout keeps what was measured
            with open(a.json + ".tmp", "w") as f:
                json.dump(out, f, indent=2)
            os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
