#!/usr/bin/env python3
"""Real torch.profiler traces of a Hugging Face + PEFT LoRA step for `tprobe kernels` (docs/kernels.md).

The model is Gemma4ForCausalLM from transformers with a small Gemma-4-shaped config: 6 layers in the
5:1 sliding/full pattern, the 26B-A4B head dims (256 sliding, 512 full, k=v on full layers), a
sliding window, a MoE block with a few experts, bf16 weights on the GPU, LoRA r16 on
q,k,v,o,gate,up,down, reentrant gradient checkpointing, AdamW on the LoRA parameters. Each trace
is one torch.profiler session (CPU + CUDA activities) with a schedule of wait 1, warm-up 1 and
--active steps, so the trace holds ProfilerStep#N ranges; it is exported as Chrome trace .json.gz.

Beside every trace a JSON records, from the same profiler session: the sum over every
key_averages() row of its self device time (the sum a user gets by adding up the table torch
prints), the same sum split by CPU rows and device rows, the sum of the device events in
prof.events(), and the sum of the kernel/memcpy/memset durations read back from the exported file.
The first is the double count `tprobe kernels` warns about; the others are the device total.

--memory-only records one trace with profile_memory=True as well ([memory] instant events:
bytes, total allocated and reserved), under --checkpointing reentrant|non-reentrant; --stack-only
one with with_stack=True under either (the non-reentrant one is the step most users run:
`model(input_ids=..., labels=...).loss.backward()` with use_reentrant=False).

--ranges records the user's own record_function ranges around the step (train_step > forward,
backward > backward_call, optimizer; a log_loss range that syncs), the next batch copied host to
device on a side stream that the compute stream waits for (cudaEventRecord /
cudaStreamWaitEvent), and CUDA synchronization events (_ExperimentalConfig
enable_cuda_sync_events): what `tprobe kernels`' per-stream, user-range, time-series and
critical-path figures read.

Usage: hf_profile_trace.py OUT_DIR [--seq 256] [--big-seq 2048] [--active 3]
                           [--stack-only | --memory-only | --ranges]
                           [--checkpointing reentrant|non-reentrant]
Writes: OUT_DIR/hf-sdpa-2x<seq>.json.gz, hf-eager-2x<seq>.json.gz, hf-sdpa-2x<big>.json.gz and a
<name>.sums.json beside each; OUT_DIR/summary.json.
"""
import argparse
import gzip
import json
import os
import sys
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False


def small_config(attn):
    import transformers
    layers = 6
    kw = dict(hidden_size=512, num_hidden_layers=layers, intermediate_size=1024,
              num_attention_heads=4, num_key_value_heads=2, head_dim=256, global_head_dim=512,
              num_global_key_value_heads=1, attention_k_eq_v=True,
              layer_types=["full_attention" if i % 6 == 5 else "sliding_attention"
                           for i in range(layers)],
              sliding_window=128, vocab_size=8192, enable_moe_block=True, num_experts=8,
              top_k_experts=2, moe_intermediate_size=256, hidden_size_per_layer_input=0,
              num_kv_shared_layers=0, final_logit_softcapping=30.0, tie_word_embeddings=True,
              rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
              max_position_embeddings=8192,
              rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": {"rope_type": "proportional",
                                                  "partial_rotary_factor": 0.25,
                                                  "rope_theta": 1e6}})
    while True:
        try:
            cfg = transformers.Gemma4TextConfig(**kw)
            break
        except TypeError as e:  # an argument this transformers version does not know
            bad = [k for k in kw if f"'{k}'" in str(e)]
            if not bad:
                raise
            print(f"config: dropping unsupported argument {bad[0]} ({e})")
            kw.pop(bad[0])
    cfg._attn_implementation = attn
    return cfg


def build(attn, reentrant=True):
    import peft
    from transformers import Gemma4ForCausalLM
    torch.manual_seed(0)
    cfg = small_config(attn)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = Gemma4ForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    model.config.use_cache = False
    lcfg = peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                           target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                           "up_proj", "down_proj"])
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    model.enable_input_require_grads()
    model = peft.get_peft_model(model, lcfg)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    return cfg, model, opt


def device_sum_from_file(path):
    """Sum of kernel/memcpy/memset durations (us) in an exported trace, read independently."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    total, n = 0.0, 0
    for ev in doc.get("traceEvents", []):
        if ev.get("ph") == "X" and ev.get("cat", "").lower() in (
                "kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"):
            total += float(ev.get("dur", 0))
            n += 1
    return total, n


def profile_one(name, attn, seq, active, out_dir, batch=2, with_stack=False, memory=False,
                reentrant=True, ranges=False):
    from torch.profiler import ProfilerActivity, profile, schedule
    cfg, model, opt = build(attn, reentrant)
    g = torch.Generator(device="cuda").manual_seed(seq)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda", generator=g)
    labels = ids.clone()
    path = os.path.join(out_dir, name + ".json.gz")
    sums = {"name": name, "attn": attn, "batch": batch, "seq": seq, "active_steps": active,
            "torch": torch.__version__, "trace": os.path.basename(path)}

    def on_ready(prof):
        prof.export_chrome_trace(path)
        rows = prof.key_averages()
        field = "self_device_time_total" if hasattr(rows[0], "self_device_time_total") \
            else "self_cuda_time_total"
        all_us = cpu_us = dev_us = 0.0
        top = []
        for r in rows:
            v = float(getattr(r, field))
            all_us += v
            kind = getattr(getattr(r, "device_type", None), "name", "?")
            if kind == "CPU":
                cpu_us += v
            else:
                dev_us += v
            top.append((v, kind, r.key))
        ev_us, ev_n = 0.0, 0
        try:
            for ev in prof.events():
                if getattr(getattr(ev, "device_type", None), "name", "") == "CUDA":
                    t = getattr(ev, "device_time", None)
                    ev_us += float(t if t is not None else ev.time_range.elapsed_us())
                    ev_n += 1
        except Exception as e:  # the key_averages sums above are still worth keeping
            sums["events_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        top.sort(reverse=True)
        sums.update(self_device_time_field=field, key_averages_rows=len(rows),
                    key_averages_self_device_sum_us=all_us,
                    key_averages_self_device_sum_cpu_rows_us=cpu_us,
                    key_averages_self_device_sum_device_rows_us=dev_us,
                    events_device_sum_us=ev_us, events_device_count=ev_n,
                    key_averages_top=[{"self_device_us": v, "device_type": k, "key": key[:200]}
                                      for v, k, key in top[:25]])

    def step():
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    # --ranges: the same step inside the user's own ranges, with the next batch prefetched on a
    # side stream from pinned host memory and the loss logged (a device-to-host sync).
    copy_stream = torch.cuda.Stream()
    host_ids = ids.cpu().pin_memory()
    logged = []

    def step_ranges():
        from torch.profiler import record_function
        with record_function("train_step"):
            with record_function("h2d_next_batch"):
                with torch.cuda.stream(copy_stream):
                    nxt = host_ids.to("cuda", non_blocking=True)
                    ready = torch.cuda.Event()
                    ready.record(copy_stream)
            with record_function("forward"):
                loss = model(input_ids=ids, labels=labels).loss
            with record_function("backward"):
                with record_function("backward_call"):
                    loss.backward()
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            torch.cuda.current_stream().wait_event(ready)
            nxt.record_stream(torch.cuda.current_stream())
        with record_function("log_loss"):
            logged.append(float(loss.item()))
        return loss

    sched = schedule(wait=1, warmup=1, active=active, repeat=1)
    extra = {}
    if ranges:
        try:  # CUDA synchronization events (torch >= 2.1): what the critical path's sync edges read
            extra["experimental_config"] = torch._C._profiler._ExperimentalConfig(
                enable_cuda_sync_events=True)
        except Exception as e:  # an older torch: the trace is still useful without them
            sums["cuda_sync_events_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    sums["ranges"] = ranges
    sums["cuda_sync_events"] = "experimental_config" in extra
    t0 = time.time()
    # with_stack=True records the Python stack, which holds the module hierarchy as
    # python_function events ("nn.Module: Gemma4TextDecoderLayer_3"): what `tprobe kernels`
    # attributes parts from.
    sums["with_stack"] = with_stack
    sums["profile_memory"] = memory
    sums["use_reentrant"] = reentrant
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,
                 on_trace_ready=on_ready, with_stack=with_stack, profile_memory=memory,
                 **extra) as prof:
        for _ in range(2 + active):
            loss = step_ranges() if ranges else step()
            torch.cuda.synchronize()
            prof.step()
    sums["profile_wall_s"] = time.time() - t0
    sums["loss"] = float(loss.item())
    sums["experts_implementation"] = str(getattr(model.config, "_experts_implementation", "?"))
    try:
        f_us, f_n = device_sum_from_file(path)
        sums.update(file_device_sum_us=f_us, file_device_count=f_n,
                    trace_bytes=os.path.getsize(path))
        if f_us > 0:
            sums["key_averages_over_file_ratio"] = sums["key_averages_self_device_sum_us"] / f_us
    except Exception as e:  # the trace is still useful without the cross-check
        sums["file_read_error"] = str(e)[:300]
    with open(os.path.join(out_dir, name + ".sums.json"), "w") as f:
        json.dump(sums, f, indent=2)
    print(f"{name}: {sums.get('trace_bytes', 0) / 1e6:.2f} MB, key_averages self-device sum "
          f"{sums['key_averages_self_device_sum_us'] / 1e3:.2f} ms, device events "
          f"{sums.get('file_device_sum_us', float('nan')) / 1e3:.2f} ms "
          f"(ratio {sums.get('key_averages_over_file_ratio', float('nan')):.3f}), "
          f"{sums['profile_wall_s']:.1f} s")
    del model, opt
    torch.cuda.empty_cache()
    return sums


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--big-seq", type=int, default=2048)
    ap.add_argument("--active", type=int, default=3)
    ap.add_argument("--stack-only", action="store_true",
                    help="one sdpa trace at --seq recorded with with_stack=True (module events)")
    ap.add_argument("--memory-only", action="store_true",
                    help="one sdpa trace at --seq with with_stack=True and profile_memory=True "
                         "([memory] events) under --checkpointing")
    ap.add_argument("--ranges", action="store_true",
                    help="one sdpa trace at --seq inside the user's own record_function ranges, "
                         "with a side-stream copy and CUDA sync events")
    ap.add_argument("--checkpointing", choices=["reentrant", "non-reentrant"], default="reentrant")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    import peft
    import transformers
    print(f"torch {torch.__version__} transformers {transformers.__version__} peft {peft.__version__}"
          f" on {torch.cuda.get_device_name(0)}")
    runs = [(f"hf-sdpa-2x{a.seq}", "sdpa", a.seq, a.active, False),
            (f"hf-eager-2x{a.seq}", "eager", a.seq, a.active, False),
            (f"hf-sdpa-2x{a.big_seq}", "sdpa", a.big_seq, 2, False)]
    tag = "" if a.checkpointing == "reentrant" else "-nonreentrant"
    if a.stack_only:
        runs = [(f"hf-sdpa-stack{tag}-2x{a.seq}", "sdpa", a.seq, a.active, True)]
    memory = a.memory_only
    if memory:
        runs = [(f"hf-sdpa-memory{tag}-2x{a.seq}", "sdpa", a.seq, a.active, True)]
    if a.ranges:
        runs = [(f"hf-sdpa-ranges{tag}-2x{a.seq}", "sdpa", a.seq, a.active, False)]
    summary = {"torch": torch.__version__, "transformers": transformers.__version__,
               "peft": peft.__version__, "device": torch.cuda.get_device_name(0), "runs": []}
    rc = 0
    for name, attn, seq, active, stack in runs:
        try:
            summary["runs"].append(profile_one(name, attn, seq, active, a.out_dir,
                                               with_stack=stack, memory=memory,
                                               reentrant=a.checkpointing == "reentrant",
                                               ranges=a.ranges))
        except Exception as e:  # a failed run is data; the next one still runs
            rc = 1
            print(f"{name}: FAILED {type(e).__name__}: {e}")
            summary["runs"].append({"name": name, "outcome": "error",
                                    "message": f"{type(e).__name__}: {str(e)[:500]}"})
            torch.cuda.empty_cache()
    with open(os.path.join(a.out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return rc


if __name__ == "__main__":
    sys.exit(main())
