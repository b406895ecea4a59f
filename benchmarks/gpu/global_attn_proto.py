#!/usr/bin/env python3
"""Prototype of the blockwise-GEMM global attention (issue 17) beside is_causal SDPA, on one GPU.

The Gemma-4 26B-A4B global layers: head_dim 512, 16 query heads over 2 KV heads, causal, scale 1.0.
Before issue 17, tprobe's flash-window ran them as is_causal SDPA on repeated KV heads (flash and
cuDNN refuse head_dim 512, so the memory-efficient sm80 kernels ran); that is the `sdpa_today` row
(named when it was the path).
The prototype is a torch.autograd.Function:

  forward   per query block of `block` positions, the 8 query heads of a KV head folded into the
            GEMM rows: S = Q_blk K[:end]^T (fp32 out, or bf16 in the "bf16s" variant), the causal
            mask applied to the diagonal block only; fp32 scores: log-sum-exp L, P = exp(S - L) in
            place, P (bf16) V; bf16s: softmax, L kept beside. Saves q, k, v and L, never P.
  backward  per query block: S recomputed; fp32 scores: P = exp(S - L); bf16s: P = softmax(S)
            again; dP = dO V^T, dS = _softmax_backward_data(dP, P) = P (dP - rowsum(P dP)),
            dQ_blk = dS K, dK += dS^T Q_blk, dV += P^T dO (dK, dV accumulated in fp32).

The engine's path it led to (src/model/blockwise_attention.cpp, flash-window's head_dim > 256
layers on CUDA and every layer of --attn blockwise) keeps the folded block rows, fp32 scores, the
diagonal-only mask and the fp32 dK/dV, and differs: the forward takes softmax over each block row
and saves only q, k, v; the backward takes the softmax of the recomputed row again (exact: a block
row holds every key its queries see). Saving L is its kLogSumExp option (tprobe_global_attn_bench
--lse-block). It also takes a sliding window and per-row lengths, and defaults to block 512.
This file is kept as the record of the prototype's measurements (docs/global-attention.md).

Timing: CUDA events, 2 warm-ups, median of 5, at B=2, N=16,384 (and --n). Peak memory is the
caching allocator's peak above what the inputs already hold. Error: relative L2 of out/dq/dk/dv
against an fp32 eager reference at N=--ref-n (not a multiple of the block on purpose).

Usage: global_attn_proto.py [--n 16384] [--ref-n 4000] [--blocks 512 1024 2048 4096]
                            [--q-scales 1.0 0.1] [--json OUT]
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


HAS_OUT_DTYPE = True


def bmm32(a, b):
    """bf16 x bf16 -> fp32 output (fp32 accumulate, no rounding of the result to bf16). Without
    the out_dtype overload the result is rounded to bf16 first (reported as bmm_out_dtype false)."""
    if a.dtype in (torch.float32, torch.float64):
        return torch.bmm(a, b)
    if not HAS_OUT_DTYPE:
        return torch.bmm(a, b).float()
    return torch.bmm(a, b, out_dtype=torch.float32)


try:
    _x = torch.zeros(1, 2, 2, device="cuda", dtype=torch.bfloat16)
    torch.bmm(_x, _x, out_dtype=torch.float32)
except Exception as e:  # noqa: BLE001 - any failure means the overload is missing
    HAS_OUT_DTYPE = False
    print("bmm(out_dtype=float32) not available:", e)

HAS_SMB_HALF_TO_FLOAT = True
try:
    _g = torch.zeros(1, 4, device="cuda", dtype=torch.float32)
    torch._softmax_backward_data(_g, _g, -1, torch.bfloat16)
except Exception as e:  # noqa: BLE001
    HAS_SMB_HALF_TO_FLOAT = False
    print("_softmax_backward_data fp32 -> bf16 not available:", str(e).splitlines()[0])


def fold_q(q5, i0, i1):
    """q5 [B, Hkv, G, N, D] -> rows i0..i1 of every head of a group: [B*Hkv, G*(i1-i0), D]."""
    b, hkv, g, _, d = q5.shape
    return q5[:, :, :, i0:i1].reshape(b * hkv, g * (i1 - i0), d)


def diag_mask(bq, device):
    """True where key > query inside the diagonal block: [bq, bq] over the block's own keys."""
    r = torch.arange(bq, device=device)
    return r.unsqueeze(0) > r.unsqueeze(1)


class BlockwiseAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, block, variant):
        B, Hq, N, D = q.shape
        Hkv = k.shape[1]
        G = Hq // Hkv
        q5 = q.view(B, Hkv, G, N, D)
        kf = k.reshape(B * Hkv, N, D)
        vf = v.reshape(B * Hkv, N, D)
        out = torch.empty(B, Hkv, G, N, D, device=q.device, dtype=q.dtype)
        lse = torch.empty(B * Hkv, G, N, device=q.device, dtype=torch.float32)
        for i0 in range(0, N, block):
            i1 = min(N, i0 + block)
            bq = i1 - i0
            qb = fold_q(q5, i0, i1)
            if variant == "bf16s":
                s = torch.bmm(qb, kf[:, :i1].transpose(1, 2))
            else:
                s = bmm32(qb, kf[:, :i1].transpose(1, 2))
            s4 = s.view(B * Hkv, G, bq, i1)
            s4[..., i0:i1].masked_fill_(diag_mask(bq, q.device), float("-inf"))
            if variant == "bf16s":
                p = torch.softmax(s, -1)  # bf16 in/out, fp32 inside
                lse[:, :, i0:i1] = torch.logsumexp(s4.float(), -1)
            else:
                m = torch.logsumexp(s4, -1)
                lse[:, :, i0:i1] = m
                s4.sub_(m.unsqueeze(-1)).exp_()  # in place: one fp32 block row alive
                p = s.to(q.dtype)
                del m
            del s, s4
            o = torch.bmm(p, vf[:, :i1])
            out[:, :, :, i0:i1] = o.view(B, Hkv, G, bq, D)
            del p, o
        ctx.save_for_backward(q, k, v, lse)
        ctx.block = block
        ctx.variant = variant
        return out.view(B, Hq, N, D)

    @staticmethod
    def backward(ctx, dout):
        q, k, v, lse = ctx.saved_tensors
        block, variant = ctx.block, ctx.variant
        B, Hq, N, D = q.shape
        Hkv = k.shape[1]
        G = Hq // Hkv
        q5 = q.view(B, Hkv, G, N, D)
        do5 = dout.contiguous().view(B, Hkv, G, N, D)
        kf = k.reshape(B * Hkv, N, D)
        vf = v.reshape(B * Hkv, N, D)
        acc = torch.float64 if q.dtype == torch.float64 else torch.float32
        dq = torch.empty_like(q5)
        dk = torch.zeros(B * Hkv, N, D, device=q.device, dtype=acc)
        dv = torch.zeros(B * Hkv, N, D, device=q.device, dtype=acc)
        for i0 in range(0, N, block):
            i1 = min(N, i0 + block)
            bq = i1 - i0
            qb = fold_q(q5, i0, i1)
            dob = fold_q(do5, i0, i1)
            kt = kf[:, :i1].transpose(1, 2)
            vt = vf[:, :i1].transpose(1, 2)
            if variant == "bf16s":
                s = torch.bmm(qb, kt)
                s4 = s.view(B * Hkv, G, bq, i1)
                s4[..., i0:i1].masked_fill_(diag_mask(bq, q.device), float("-inf"))
                p = torch.softmax(s, -1)  # recomputed from the whole block row: no lse needed
                del s, s4
                dp = torch.bmm(dob, vt)
                ds = torch._softmax_backward_data(dp, p, -1, p.dtype)
                del dp
                pb = p
            else:
                s = bmm32(qb, kt)
                s4 = s.view(B * Hkv, G, bq, i1)
                s4[..., i0:i1].masked_fill_(diag_mask(bq, q.device), float("-inf"))
                s4.sub_(lse[:, :, i0:i1].unsqueeze(-1)).exp_()  # s is now P in fp32
                p = s
                del s4
                dp = bmm32(dob, vt)
                if q.dtype == torch.bfloat16 and HAS_SMB_HALF_TO_FLOAT:
                    ds = torch._softmax_backward_data(dp, p, -1, q.dtype)
                else:
                    ds = torch._softmax_backward_data(dp, p, -1, p.dtype).to(q.dtype)
                del dp
                pb = p.to(q.dtype)
                del p
            dq[:, :, :, i0:i1] = torch.bmm(ds, kf[:, :i1]).view(B, Hkv, G, bq, D)
            dk[:, :i1] += bmm32(ds.transpose(1, 2), qb)
            dv[:, :i1] += bmm32(pb.transpose(1, 2), dob)
            del ds, pb
        return (dq.view(B, Hq, N, D), dk.view(B, Hkv, N, D).to(k.dtype),
                dv.view(B, Hkv, N, D).to(v.dtype), None, None)


def blockwise(q, k, v, block, variant="f32s"):
    return BlockwiseAttention.apply(q, k, v, block, variant)


def repeat_kv(x, n):
    b, h, s, d = x.shape
    return x[:, :, None].expand(b, h, n, s, d).reshape(b, h * n, s, d)


def sdpa_today(q, k, v):
    n = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, repeat_kv(k, n), repeat_kv(v, n), is_causal=True,
                                          scale=1.0)


def eager_reference(q, k, v):
    n = q.shape[1] // k.shape[1]
    s = torch.matmul(q, repeat_kv(k, n).transpose(2, 3))
    N = q.shape[2]
    mask = torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1)
    s = s.masked_fill(mask, float("-inf"))
    return torch.matmul(torch.softmax(s, -1), repeat_kv(v, n))


def make_inputs(B, Hq, Hkv, N, D, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    # q and k are RMS-normed in the model (unit RMS per element with weight 1), so randn is their
    # scale; with scale 1.0 the scores have std sqrt(512) ~ 22.6.
    q = torch.randn(B, Hq, N, D, device="cuda", dtype=torch.float32, generator=g)
    k = torch.randn(B, Hkv, N, D, device="cuda", dtype=torch.float32, generator=g)
    v = torch.randn(B, Hkv, N, D, device="cuda", dtype=torch.float32, generator=g)
    do = torch.randn(B, Hq, N, D, device="cuda", dtype=torch.float32, generator=g)
    return [t.to(dtype) for t in (q, k, v, do)]


def timed(fn, reps=5, warm=2):
    times = []
    for i in range(warm + reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        if i >= warm:
            times.append(start.elapsed_time(stop) / 1e3)
    return statistics.median(times), times


def measure(name, attn, q, k, v, do):
    """Forward (grad enabled, as the checkpoint recompute runs it) and forward+backward."""
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    row = {"name": name}
    try:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        fwd_s, _ = timed(lambda: attn(q, k, v))

        def step():
            q.grad = k.grad = v.grad = None
            attn(q, k, v).backward(do)

        step()
        torch.cuda.synchronize()
        q.grad = k.grad = v.grad = None
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fb_s, fb_all = timed(step)
        peak = torch.cuda.max_memory_allocated() - base
        row.update(outcome="ok", forward_s=fwd_s, forward_backward_s=fb_s,
                   forward_backward_all_s=fb_all, peak_above_inputs_bytes=peak)
    except Exception as e:  # noqa: BLE001 - a failed measurement is a row, the run goes on
        row.update(outcome="error", message=str(e).splitlines()[0][:300])
    q.grad = k.grad = v.grad = None
    torch.cuda.empty_cache()
    return row


def rel_l2(a, b):
    return (a.double() - b.double()).norm().item() / max(b.double().norm().item(), 1e-300)


def reference(q32, k32, v32, do32):
    leaves = [t.detach().clone().requires_grad_(True) for t in (q32, k32, v32)]
    out = eager_reference(*leaves)
    out.backward(do32)
    return [out.detach()] + [t.grad for t in leaves]


def errors(name, attn, refs, inputs32, dtype):
    """Relative L2 against two fp32 references: one from the fp32 inputs (what the issue's bound
    is about: it includes rounding the inputs to bf16), one from the bf16-rounded inputs in fp32
    (the attention's own error, `*_own`)."""
    q32, k32, v32, do32 = inputs32
    row = {"name": name, "dtype": str(dtype).replace("torch.", "")}
    try:
        leaves = [t.detach().to(dtype).requires_grad_(True) for t in (q32, k32, v32)]
        out = attn(*leaves)
        out.backward(do32.to(dtype))
        got = [out.detach()] + [t.grad for t in leaves]
        row["outcome"] = "ok"
        for key, ref in refs.items():
            for label, a, b in zip(("out", "dq", "dk", "dv"), got, ref):
                row[label + key] = rel_l2(a, b)
    except Exception as e:  # noqa: BLE001
        row.update(outcome="error", message=str(e).splitlines()[0][:300])
    torch.cuda.empty_cache()
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--ref-n", type=int, default=4000)
    ap.add_argument("--blocks", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    ap.add_argument("--q-scales", type=float, nargs="+", default=[1.0, 0.1])
    ap.add_argument("--json")
    a = ap.parse_args()
    B, Hq, Hkv, D = 2, 16, 2, 512
    t0 = time.time()
    dev = torch.cuda.get_device_name(0)
    print(f"device {dev}, torch {torch.__version__}, bmm out_dtype {HAS_OUT_DTYPE}, "
          f"softmax_backward fp32->bf16 {HAS_SMB_HALF_TO_FLOAT}", flush=True)
    floor_fwd = 4 * B * Hq * (a.n * a.n / 2) * D
    result = {"device": dev, "torch": torch.__version__, "batch": B, "seq": a.n, "q_heads": Hq,
              "kv_heads": Hkv, "head_dim": D, "bmm_out_dtype": HAS_OUT_DTYPE,
              "softmax_backward_half_to_float": HAS_SMB_HALF_TO_FLOAT,
              "causal_gemm_flop_forward": floor_fwd, "causal_gemm_flop_backward": 2.5 * floor_fwd,
              "errors": [], "timings": []}

    # Errors first (small N, cheap): fp32 blockwise must match the fp32 reference to rounding;
    # bf16 rows are what training sees.
    for q_scale in a.q_scales:
        inputs32 = make_inputs(1, Hq, Hkv, a.ref_n, D, torch.float32, 1)
        inputs32[0] = inputs32[0] * q_scale  # score spread: std sqrt(512) * q_scale
        cases = [("blockwise_f32s(block=1024)", lambda q, k, v: blockwise(q, k, v, 1024),
                  torch.float32),
                 ("sdpa_today", sdpa_today, torch.bfloat16),
                 ("blockwise_f32s(block=1024)", lambda q, k, v: blockwise(q, k, v, 1024),
                  torch.bfloat16),
                 ("blockwise_f32s(block=300)", lambda q, k, v: blockwise(q, k, v, 300),
                  torch.bfloat16),
                 ("blockwise_bf16s(block=1024)", lambda q, k, v: blockwise(q, k, v, 1024, "bf16s"),
                  torch.bfloat16)]
        refs32 = {"": reference(*inputs32)}
        rounded = [t.to(torch.bfloat16).float() for t in inputs32]
        refs16 = {"": refs32[""], "_own": reference(*rounded)}
        for name, fn, dt in cases:
            row = errors(name, fn, refs32 if dt == torch.float32 else refs16, inputs32, dt)
            row["q_scale"] = q_scale
            result["errors"].append(row)
            print("error", json.dumps(row), flush=True)
        del inputs32, rounded, refs32, refs16
        torch.cuda.empty_cache()

    q, k, v, do = make_inputs(B, Hq, Hkv, a.n, D, torch.bfloat16, 2)
    runs = [("sdpa_today", sdpa_today)]
    for blk in a.blocks:
        runs.append((f"blockwise_f32s(block={blk})", lambda q, k, v, blk=blk: blockwise(q, k, v, blk)))
    runs.append(("blockwise_bf16s(block=1024)", lambda q, k, v: blockwise(q, k, v, 1024, "bf16s")))
    for name, fn in runs:
        row = measure(name, fn, q, k, v, do)
        result["timings"].append(row)
        print("timing", json.dumps(row), flush=True)
    result["wall_s"] = time.time() - t0

    print(f"\nB={B} N={a.n} Hq={Hq} Hkv={Hkv} D={D} bf16; GEMM floor at 790 TFLOP/s: "
          f"fwd {floor_fwd / 790e12 * 1e3:.1f} ms, fwd+bwd {3.5 * floor_fwd / 790e12 * 1e3:.1f} ms")
    print(f"{'path':34} {'fwd ms':>8} {'fwd+bwd ms':>11} {'peak GiB':>9}")
    for r in result["timings"]:
        if r["outcome"] == "ok":
            print(f"{r['name']:34} {r['forward_s'] * 1e3:8.1f} {r['forward_backward_s'] * 1e3:11.1f} "
                  f"{r['peak_above_inputs_bytes'] / 2**30:9.2f}")
        else:
            print(f"{r['name']:34} {r['outcome']}: {r['message']}")
    print(f"\nrelative L2 vs fp32 eager reference at N={a.ref_n} (B=1):")
    print("(own: against the reference computed from the bf16-rounded inputs)")
    print(f"{'path':34} {'q_scale':>7} {'dtype':>8} {'out':>9} {'dq':>9} {'dk':>9} {'dv':>9} {'out_own':>9} "
          f"{'dq_own':>9} {'dk_own':>9} {'dv_own':>9}")
    for r in result["errors"]:
        if r["outcome"] == "ok":
            own = "".join(f" {r[x + '_own']:9.2e}" for x in ("out", "dq", "dk", "dv")
                          if x + "_own" in r)
            print(f"{r['name']:34} {r['q_scale']:7.2f} {r['dtype']:>8} {r['out']:9.2e} {r['dq']:9.2e} {r['dk']:9.2e} "
                  f"{r['dv']:9.2e}{own}")
        else:
            print(f"{r['name']:34} {r['outcome']}: {r['message']}")
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        import os
        os.replace(a.json + ".tmp", a.json)
    print(f"wall {result['wall_s']:.1f} s")


if __name__ == "__main__":
    main()
