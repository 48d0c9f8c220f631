#!/usr/bin/env python3
"""Throughput of l3's error-bounded encoder (version 3, differences predictor) on one
activation-like array (post-GELU convolution output, N x C x H x W float32): the CPU encoder
(`encode_field`, rayon on every core), the GPU encoder from a host array (`gpu_encode_field`:
upload included) and, with CUDA, from a CUDA tensor through the exported staging buffer (the
D2D copy, the stream synchronisation and the encode), next to a CUDA device-to-device copy of
the same bytes. Every GPU file is checked byte for byte against the CPU's.

    python bench/gpu_encode_speed.py [--shape 64,64,128,128] [--rel 1e-2] [--repeats 5]

Then the same for block-coded arrays (`l3.encode_blocks`, the format `compress_activations`
keeps CUDA tensors in on l3's GPU): the CPU encoder and decoder (one thread), and on l3's GPU
the encode of the staging buffer's values into a stream kept in GPU memory (one submission,
its size read back, the stream copied to its own buffer) and the decode of that stream into a
staging buffer; with CUDA, from a CUDA tensor (copy + sync + encode) and back into a tensor of
torch's own (decode + clone). Every stream is checked against the CPU's bytes, every decode
against the CPU's values.

Prints one line per path: median seconds of --repeats, GB/s of input, the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np


def timed(f, repeats):
    out = None
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="64,64,128,128")
    ap.add_argument("--rel", type=float, default=1e-2)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    import torch

    import l3

    shape = tuple(int(s) for s in args.shape.split(","))
    torch.manual_seed(0)
    x = torch.nn.functional.avg_pool2d(torch.randn(*shape), 5, 1, 2)
    x = torch.nn.functional.gelu(x * 3).numpy()
    eb = args.rel * float(x.max() - x.min())
    gb = x.nbytes / 1e9
    print(f"array {shape} float32, {x.nbytes / 1e6:.0f} MB, bound {args.rel} of the range; "
          f"GPU: {l3.gpu_adapter()}")
    kw = dict(max_error=eb, axes=0b1100)
    t, cpu = timed(lambda: l3.encode_field(x, version=3, predictor="differences", **kw),
                   args.repeats)
    print(f"CPU encode_field: {t:.3f} s, {gb / t:.2f} GB/s, ratio {x.nbytes / len(cpu):.1f}")
    t, gpu = timed(lambda: l3._l3.gpu_encode_field(x, **kw), args.repeats)
    print(f"GPU gpu_encode_field (host array): {t:.3f} s, {gb / t:.2f} GB/s, "
          f"{'same bytes' if gpu == cpu else 'DIFFERENT BYTES'}")
    ok = gpu == cpu
    t, blocks = timed(lambda: l3.encode_blocks(x, max_error=eb), args.repeats)
    print(f"CPU encode_blocks: {t:.3f} s, {gb / t:.2f} GB/s, ratio {x.nbytes / len(blocks):.1f}")
    t, back = timed(lambda: l3.decode_blocks(blocks), args.repeats)
    print(f"CPU decode_blocks: {t:.3f} s, {gb / t:.2f} GB/s")
    try:
        staging = l3._l3.GpuEncodeStaging(x.nbytes)
        out = l3._l3.GpuEncodeStaging(x.nbytes)
    except l3.GpuError as e:
        print(f"GPU blocks: no exportable memory here ({e})")
        staging = None
    if staging is not None:
        staging.write(x)
        t, stream = timed(lambda: staging.encode_blocks(x.size, max_error=eb,
                                                        stride=shape[-1]), args.repeats)
        same = stream.to_bytes() == blocks
        print(f"GPU encode_blocks (staging -> GPU memory): {t * 1e3:.2f} ms, {gb / t:.2f} GB/s, "
              f"{'same bytes' if same else 'DIFFERENT BYTES'}")
        t, _ = timed(lambda: out.decode_blocks_into(stream), args.repeats)
        same_values = np.array_equal(np.frombuffer(out.read_back(x.nbytes), np.uint32),
                                     back.view(np.uint32))
        print(f"GPU decode_blocks (GPU memory -> staging): {t * 1e3:.2f} ms, {gb / t:.2f} GB/s, "
              f"{'same values' if same_values else 'DIFFERENT VALUES'}")
        ok = ok and same and same_values
        # The same values as many arrays (what one step of a network saves): one at a time
        # (a submission and a wait each) against one batch (one of each), and decoded back.
        parts = min(shape[0], 64)
        n = x.size // parts
        jobs = [(4 * k * n, n, eb, shape[-1]) for k in range(parts)]
        t1, _ = timed(lambda: [staging.encode_blocks_batch([j]) for j in jobs], args.repeats)
        tb, streams = timed(lambda: staging.encode_blocks_batch(jobs), args.repeats)
        same = all(s.to_bytes() == l3.encode_blocks(x.reshape(-1)[k * n:(k + 1) * n],
                                                   max_error=eb, stride=shape[-1])
                   for k, s in enumerate(streams[:4]))
        print(f"GPU encode_blocks, {parts} arrays: one at a time {t1 * 1e3:.2f} ms, one batch "
              f"{tb * 1e3:.2f} ms ({gb / tb:.2f} GB/s), {'same bytes' if same else 'DIFFERENT BYTES'}")
        back_jobs = [(s, 4 * k * n) for k, s in enumerate(streams)]
        t1, _ = timed(lambda: [out.decode_blocks_batch([j]) for j in back_jobs], args.repeats)
        tb, _ = timed(lambda: out.decode_blocks_batch(back_jobs), args.repeats)
        same_values = np.array_equal(np.frombuffer(out.read_back(x.nbytes), np.uint32),
                                     back.view(np.uint32))
        print(f"GPU decode_blocks, {parts} arrays: one at a time {t1 * 1e3:.2f} ms, one batch "
              f"{tb * 1e3:.2f} ms ({gb / tb:.2f} GB/s), "
              f"{'same values' if same_values else 'DIFFERENT VALUES'}")
        ok = ok and same and same_values
    if torch.cuda.is_available():
        from l3._activations import _CudaStaging

        xc = torch.from_numpy(x).cuda()
        staging = _CudaStaging(x.nbytes)

        def via_staging():
            staging.view[: xc.numel()].copy_(xc.reshape(-1))
            torch.cuda.current_stream().synchronize()
            return staging.staging.encode(list(shape), **kw)

        t, dev = timed(via_staging, args.repeats)
        print(f"GPU from a CUDA tensor (copy + sync + encode): {t:.3f} s, {gb / t:.2f} GB/s, "
              f"{'same bytes' if dev == cpu else 'DIFFERENT BYTES'}")
        ok = ok and dev == cpu

        def blocks_from_cuda():
            staging.view[: xc.numel()].copy_(xc.reshape(-1))
            torch.cuda.current_stream().synchronize()
            return staging.staging.encode_blocks(xc.numel(), max_error=eb, stride=shape[-1])

        t, stream = timed(blocks_from_cuda, args.repeats)
        print(f"GPU blocks from a CUDA tensor (copy + sync + encode): {t * 1e3:.2f} ms, "
              f"{gb / t:.2f} GB/s, "
              f"{'same bytes' if stream.to_bytes() == blocks else 'DIFFERENT BYTES'}")
        ok = ok and stream.to_bytes() == blocks
        back_staging = _CudaStaging(x.nbytes)

        def blocks_to_cuda():
            back_staging.staging.decode_blocks_into(stream)
            y = back_staging.view[: xc.numel()].clone()
            torch.cuda.synchronize()
            return y

        t, y = timed(blocks_to_cuda, args.repeats)
        same_values = np.array_equal(y.cpu().numpy().view(np.uint32), back.view(np.uint32))
        print(f"GPU blocks to a CUDA tensor (decode + clone): {t * 1e3:.2f} ms, "
              f"{gb / t:.2f} GB/s, {'same values' if same_values else 'DIFFERENT VALUES'}")
        ok = ok and same_values
        dst = torch.empty_like(xc)

        def copy():
            dst.copy_(xc)
            torch.cuda.synchronize()

        t, _ = timed(copy, args.repeats)
        print(f"CUDA device-to-device copy: {t * 1e3:.2f} ms, {gb / t:.1f} GB/s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
