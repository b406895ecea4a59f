#!/usr/bin/env python3
"""Writes a synthetic Kineto-shaped Chrome trace of a given size, for the `tprobe kernels` benchmark.

The events have the shapes and argument sets PyTorch 2.x writes (cpu_op with External id,
cuda_runtime cudaLaunchKernel with correlation, kernel with device/stream/grid/block/registers,
ac2g flows, ProfilerStep#N user annotations on the host and on the device, backward ops under
autograd::engine::evaluate_function on a second thread, deviceProperties, baseTimeNanoseconds).
Timestamps are microseconds with three decimals, as Kineto prints them. Deterministic (seeded).

It also prints the sum of the device rows' durations it wrote (microseconds), so the benchmark's
two readers can be checked against a number neither of them computed.

Usage: make_synthetic_trace.py OUT.json[.gz] --target-mb 1024 [--steps 3] [--seed 1]
"""
import argparse
import gzip
import random

KERNELS = [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16, "
     "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, "
     "at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
     "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3>)",
     "aten::mul", 4.0),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", "aten::mm", 35.0),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas", "aten::mm", 30.0),
    ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::"
     "bfloat16_t, cutlass::arch::Sm80, true, 64, 128, 512, true, true>::Params)",
     "aten::_efficient_attention_forward", 120.0),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
     "float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::"
     "MeanOps<float, float, float, float>, unsigned int, float, 4>)", "aten::mean", 6.0),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
     "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
     "{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::"
     "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
     "{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, at::"
     "native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
     "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::"
     "TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
     "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)"
     "::{lambda(int)#1})", "aten::copy_", 3.0),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--target-mb", type=float, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    opener = gzip.open if a.out.endswith(".gz") else open
    target = int(a.target_mb * 1e6)
    written = 0
    device_sum_ns = 0
    device_rows = 0

    def us(ns):
        return f"{ns // 1000}.{ns % 1000:03d}"

    with opener(a.out, "wt") as f:
        def w(s):
            nonlocal written
            f.write(s)
            written += len(s)

        w('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {"id": 0, "name": "NVIDIA H200", '
          '"totalGlobalMem": 150109782016, "computeMajor": 9, "computeMinor": 0, '
          '"maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, '
          '"warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132, '
          '"sharedMemPerMultiprocessor": 233472}\n  ],\n'
          '  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1764576000000000000,\n'
          '  "traceEvents": [\n')
        ext = 1000
        corr = 5000
        host_ns = 1_000_000
        dev_ns = 1_200_000
        per_step = max(1, target // a.steps)
        first = True
        for step in range(a.steps):
            step_start = host_ns
            step_bytes_end = written + per_step
            body = []
            while written < step_bytes_end:
                name, op, mean_us = KERNELS[rng.randrange(len(KERNELS))]
                backward = rng.random() < 0.6
                tid = 2 if backward else 1
                ext += 1
                corr += 1
                op_dur = rng.randint(8000, 30000)
                launch_ts = host_ns + 2000
                k_dur = max(1, int(rng.gauss(mean_us, mean_us / 5) * 1000))
                dev_ns = max(dev_ns, launch_ts + 5000)
                k_ts = dev_ns
                dev_ns += k_dur + rng.randint(500, 3000)
                device_sum_ns += k_dur
                device_rows += 1
                evs = []
                if backward:
                    evs.append(f'{{"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_'
                               f'function: {op[6:].capitalize()}Backward0", "pid": 101, "tid": 2, '
                               f'"ts": {us(host_ns)}, "dur": {us(op_dur + 4000)}, "args": {{'
                               f'"External id": {ext}, "Record function id": 0, "Ev Idx": {ext}}}}}')
                    ext += 1
                evs.append(f'{{"ph": "X", "cat": "cpu_op", "name": "{op}", "pid": 101, "tid": {tid}, '
                           f'"ts": {us(host_ns + 1000)}, "dur": {us(op_dur)}, "args": {{"External '
                           f'id": {ext}, "Record function id": 0, "Sequence number": {ext}, "Fwd '
                           f'thread id": 0, "Ev Idx": {ext}}}}}')
                evs.append(f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", '
                           f'"pid": 101, "tid": {tid}, "ts": {us(launch_ts)}, "dur": {us(3500)}, '
                           f'"args": {{"External id": {ext}, "cbid": 211, "correlation": {corr}}}}}')
                evs.append(f'{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 7, '
                           f'"ts": {us(k_ts)}, "dur": {us(k_dur)}, "args": {{"External id": {ext}, '
                           f'"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": '
                           f'{corr}, "registers per thread": 128, "shared memory": 49152, '
                           f'"blocks per SM": 1.9, "warps per SM": 15.5, "grid": [264, 1, 1], '
                           f'"block": [256, 1, 1], "est. achieved occupancy %": 25}}}}')
                evs.append(f'{{"ph": "s", "id": {corr}, "pid": 101, "tid": {tid}, "ts": '
                           f'{us(launch_ts)}, "cat": "ac2g", "name": "ac2g"}}')
                evs.append(f'{{"ph": "f", "id": {corr}, "pid": 0, "tid": 7, "ts": {us(k_ts)}, '
                           f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}')
                s = ",\n".join(evs)
                w(("" if first else ",\n") + s)
                first = False
                host_ns += op_dur + 6000
            step_end = host_ns
            w(f',\n{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": 101, '
              f'"tid": 1, "ts": {us(step_start)}, "dur": {us(step_end - step_start)}, "args": '
              f'{{"External id": {ext + 1}, "Record function id": 0, "Ev Idx": 0}}}}')
            ext += 1
            host_ns += 10000
        w(f',\n{{"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", '
          f'"ts": {us(max(host_ns, dev_ns) + 1000)}}}\n  ],\n  "traceName": "synthetic"\n}}\n')
    print(f"wrote {a.out}: {written / 1e6:.1f} MB uncompressed, {device_rows} device rows, "
          f"device_sum_us={device_sum_ns / 1000:.3f}")


if __name__ == "__main__":
    main()
