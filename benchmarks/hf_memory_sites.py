#!/usr/bin/env python3
"""Where the Hugging Face + PEFT step's peak memory goes: `hf_lora_step.py --memory-sites`.

record_sites(step) runs one step under torch.cuda.memory._record_memory_history with Python
stacks and replays the allocator's trace of it: the bytes allocated over the step (from
torch.cuda.memory_allocated() before it), the peak, and every block alive at the peak, summed by
the innermost frame of the model's code (transformers, peft, the harness) and by a phase read off
the stack (forward, loss head, recompute, backward). The trace's alloc sizes are the requested
sizes; the allocator's own peak (rounded blocks) is recorded beside it.
"""
import torch

GiB = float(2 ** 30)
MODEL_FILES = ("transformers/", "peft/", "hf_lora_step.py", "torch/nn/functional.py")


def phase_of(frames):
    names = " ".join(f.get("name", "") for f in frames)
    files = " ".join(f.get("filename", "") for f in frames)
    if "chunk_loss" in names or "chunked_ce_loss" in names:
        return "loss"
    if "unpack_hook" in names or "recompute_fn" in names or (
            "checkpoint.py" in files and "backward" in names):
        return "recompute"
    if "torch/autograd/__init__.py" in files or "_engine_run_backward" in names:
        return "backward"
    return "forward"


def site_of(frames):
    for f in frames:
        fn = f.get("filename", "")
        if any(k in fn for k in MODEL_FILES):
            return f"{fn.split('site-packages/')[-1]}:{f.get('line')} {f.get('name')}"
    return "(no model frame)"


def replay(trace, start_allocated):
    live, cur = {}, start_allocated
    peak, peak_i = cur, -1
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
            cur += e["size"]
            if cur > peak:
                peak, peak_i = cur, i
        elif e["action"] == "free_completed" and e["addr"] in live:
            cur -= live.pop(e["addr"])
    alive = {}
    for e in trace[:peak_i + 1]:
        if e["action"] == "alloc":
            alive[e["addr"]] = e
        elif e["action"] == "free_completed":
            alive.pop(e["addr"], None)
    return peak, list(alive.values())


def phase_by_time(e, marks):
    # marks: unix seconds at the end of the forward and of the loss's forward
    t = e.get("time_us", 0) / 1e6
    if len(marks) >= 1 and t <= marks[0]:
        return "forward"
    if len(marks) >= 2 and t <= marks[1]:
        return "loss"
    return "backward+recompute"


def record_sites(step, top=25):
    """step(marks) runs one step and appends time.time() after the forward and the loss."""
    out = {}
    # stacks="python" made run_backward fail (SystemError, torch 2.11): the autograd thread's
    # allocations are recorded with C++ + Python stacks, or without stacks as the fallback.
    for stacks in ("all", None):
        torch.cuda.synchronize()
        start = torch.cuda.memory_allocated()
        if stacks:
            torch.cuda.memory._record_memory_history(max_entries=4_000_000, stacks=stacks)
        else:
            torch.cuda.memory._record_memory_history(max_entries=4_000_000, context=None)
        torch.cuda.reset_peak_memory_stats()
        marks = []
        try:
            step(marks)
            torch.cuda.synchronize()
            snap = torch.cuda.memory._snapshot()
            out["stacks"] = stacks or "none"
            break
        except Exception as e:  # noqa: BLE001 - a refused recording is data; try without stacks
            out.setdefault("stack_errors", []).append(f"{stacks}: {type(e).__name__}: {str(e)[:200]}")
            print(f"  memory history with stacks={stacks} failed: {type(e).__name__}")
            snap = None
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)
    if snap is None:
        return out
    trace = snap["device_traces"][0]
    peak, alive = replay(trace, start)
    by_site, by_phase = {}, {}
    for e in alive:
        fr = e.get("frames", [])
        key = (phase_of(fr) if fr else phase_by_time(e, marks), site_of(fr))
        by_site[key] = by_site.get(key, 0) + e["size"]
        by_phase[key[0]] = by_phase.get(key[0], 0) + e["size"]
    out.update({"start_allocated_bytes": start, "recorded_peak_allocated_bytes":
           torch.cuda.max_memory_allocated(), "replayed_peak_bytes": peak,
           "trace_entries": len(trace), "alive_by_phase_bytes": by_phase,
           "alive_top_sites": [{"phase": p, "site": s, "bytes": b} for (p, s), b in
                               sorted(by_site.items(), key=lambda kv: -kv[1])[:top]]})
    print(f"  memory: start {start / GiB:.2f} GiB, recorded peak "
          f"{out['recorded_peak_allocated_bytes'] / GiB:.2f}, replayed {peak / GiB:.2f}; alive by "
          "phase: " + ", ".join(f"{k} {v / GiB:.2f}" for k, v in sorted(by_phase.items())))
    for r in out["alive_top_sites"]:
        print(f"  {r['bytes'] / GiB:7.3f} GiB  {r['phase']:<9} {r['site']}")
    return out
