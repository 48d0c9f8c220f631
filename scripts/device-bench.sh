#!/usr/bin/env bash
# The GPU machine's run in one command: installs l3 from a prebuilt abi3 wheel (no package
# registry needed) and measures, on one NVIDIA GPU (an H200 with 16 cores is the target):
#
#   1. GPU decode steady state: l3-bench's GPU section, kernels in GB/s next to a copy kernel
#      and a clear of the same output size (GPU timestamps; 5 repeats, their spread);
#   2. the loader's CPU path (threads = cores, 0 workers) against torchvision ImageFolder +
#      PIL with one worker per core: RandomResizedCrop(224) + flip + normalise, batch 64, on
#      the corpus of scripts/make-loader-corpus.py (l3 compact and fast profiles);
#   3. the loader's GPU path to CUDA tensors (output="cuda", no host round trip), and to
#      pinned host tensors then .cuda() (output="host"), in images/s; the tensor loader's
#      CPU path, its GPU path read back, and handed to host and CUDA tensors, in samples/s;
#   4. the CUDA interop tests (pytest python/tests/test_cuda.py, failing instead of skipping
#      where CUDA is required).
#
# and prints one summary table (adapter, GPU, CPU, every figure, every step's status), also
# written to $OUT/summary.md ($OUT when set, else target/device-bench/). Every step runs under
# `timeout`: the caps add up to about 13 minutes (installs 60 s, steady state 90, corpus 60,
# pack 45, CPU loaders 100, GPU loaders 75, tensors 180, exact 120, tests 60); a run on an
# H200 takes about 2 (a call limited to 10 stops late steps). A failed step is a FAILED row
# and a non-zero exit status; a step that needs CUDA where there is none prints "no CUDA"
# and is skipped, unless CUDA is required (L3_REQUIRE_CUDA=1, the default where nvidia-smi
# exists): then it fails.
#
#   scripts/device-bench.sh [WHEEL]
#
# Prepare on the build machine (x86-64 Linux; the wheel's manylinux tag, e.g. 2_35, is the
# oldest glibc it runs on; the binaries need the build machine's glibc or newer), in the repo
# root, then carry wheels/, .bench-bin/ and .bench-data/ (all ignored by git) with the tree:
#
#   maturin build --release --strip -m python/Cargo.toml -o wheels/  # the l3 wheel (abi3, 4 MB)
#   pip download --only-binary=:all: -d wheels/ pytest               # if the machine lacks pytest
#   cargo build --release -p l3-bench
#   mkdir -p .bench-bin && strip -o .bench-bin/l3-bench target/release/l3-bench
#   python3 scripts/make-loader-corpus.py .bench-data/corpus         # 345 tiles, 36 MB
#
# Stripped, the three come to about 52 MB (wheel 4, l3-bench 12, corpus 36): under a 64 MiB
# carry limit. Unstripped, the wheel alone is 21 MB.
#
# WHEEL: the argument, else $L3_WHEEL, else the newest wheels/l3-*.whl. It is installed with
# `pip install --no-index --no-deps --target` into the output folder (nothing else on the
# machine changes); pytest, when missing, from wheels/ the same way. The corpus: $L3_CORPUS
# (an ImageFolder tree), else .bench-data/corpus, else made from ../shared/data/images or
# shared/data/images (the summary says which). The steady-state binary: $L3_BENCH_BIN, else
# .bench-bin/l3-bench, else target/release/l3-bench.
#
# Vulkan loader: a bare machine may lack libvulkan.so.1. Bring Debian's loader package (on the
# build machine: `apt-get download libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libopengl0
# libgles2` into .gl/; on the H200 the NVIDIA ICD found no adapter with libvulkan1 alone) and this script unpacks .gl/*.deb
# into / when the loader is missing. If no NVIDIA ICD is configured, it sets VK_DRIVER_FILES
# to the NVIDIA ICD under /usr/local/nvidia, /usr/share/vulkan or /etc/vulkan when present.
#
# Knobs: ONLY (a comma-separated list of step names: run those steps only), STEADY_MB (decoded MB of the steady-state batch, default 1024), EPOCHS (timed epochs
# per loader, default 3, after one warm-up epoch), L3_REQUIRE_CUDA (0/1), PYTHON (default
# python3). A local check without CUDA: `STEADY_MB=16 EPOCHS=1 L3_REQUIRE_CUDA=0
# scripts/device-bench.sh` (the CUDA rows then say "no CUDA").
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

OUTDIR=$(mkdir -p "${OUT:-target/device-bench}" && cd "${OUT:-target/device-bench}" && pwd)
WORK="$OUTDIR/work"
rm -rf "$WORK"
mkdir -p "$WORK"
export WGPU_BACKEND=${WGPU_BACKEND:-vulkan}
STEADY_MB=${STEADY_MB:-1024}
EPOCHS=${EPOCHS:-3}
PYTHON=${PYTHON:-python3}
if [ -z "${L3_REQUIRE_CUDA:-}" ]; then
    if command -v nvidia-smi >/dev/null; then L3_REQUIRE_CUDA=1; else L3_REQUIRE_CUDA=0; fi
fi
export L3_REQUIRE_CUDA
START=$(date +%s)
STATUS="$OUTDIR/status.tsv"
FIGURES="$OUTDIR/figures.tsv"
: >"$STATUS"
: >"$FIGURES"
FAILED=0

log() { echo "[device-bench +$(($(date +%s) - START))s] $*" >&2; }

# step NAME SECONDS CMD...: runs CMD under `timeout`, its output to $OUTDIR/NAME.log and the
# terminal; records ok / FAILED (exit status) / timed out / skipped (CMD exited 77). A shell
# function runs as `step NAME SECONDS bash -c FUNCTION` (exported with `export -f`).
step() {
    local name=$1 limit=$2 rc
    shift 2
    if [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]]; then
        return 0
    fi
    log "step $name (at most ${limit}s)"
    set +e
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$OUTDIR/$name.log"
    rc=${PIPESTATUS[0]}
    set -e
    case $rc in
        0) printf '%s\tok\n' "$name" >>"$STATUS" ;;
        77) printf '%s\tskipped: %s\n' "$name" "$(tail -n1 "$OUTDIR/$name.log")" >>"$STATUS" ;;
        124 | 137)
            printf '%s\tFAILED: timed out after %ss\n' "$name" "$limit" >>"$STATUS"
            FAILED=1
            log "FAILED: $name timed out after ${limit}s (log: $OUTDIR/$name.log)"
            ;;
        *)
            printf '%s\tFAILED: exit %s\n' "$name" "$rc" >>"$STATUS"
            FAILED=1
            log "FAILED: $name exited $rc (log: $OUTDIR/$name.log)"
            ;;
    esac
}

die() {
    log "FAILED: $*"
    exit 1
}

# --- Vulkan loader and ICD
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then
    if compgen -G ".gl/*.deb" >/dev/null; then
        log "unpacking Vulkan loader packages from .gl/"
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
    else
        log "WARNING: no libvulkan.so.1 and no .gl/*.deb: wgpu will find no Vulkan adapter"
    fi
fi
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -z "${VK_ICD_FILENAMES:-}" ]; then
    for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
        /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
        if [ -f "$icd" ]; then
            export VK_DRIVER_FILES=$icd
            log "using Vulkan ICD $icd"
            break
        fi
    done
fi

# --- install l3 from the wheel (no registry)
WHEEL=${1:-${L3_WHEEL:-}}
if [ -z "$WHEEL" ]; then
    WHEEL=$(ls -t wheels/l3-*.whl 2>/dev/null | head -n1 || true)
fi
[ -n "$WHEEL" ] && [ -f "$WHEEL" ] ||
    die "no l3 wheel: pass its path, set L3_WHEEL, or build one into wheels/ (see $0's header)"
command -v "$PYTHON" >/dev/null || die "no $PYTHON"
log "installing $WHEEL into $WORK/site"
timeout 30 "$PYTHON" -m pip install --quiet --no-index --no-deps --target "$WORK/site" "$WHEEL" ||
    die "pip could not install $WHEEL (python $("$PYTHON" -V 2>&1); the wheel is abi3 for CPython >= 3.9)"
if ! "$PYTHON" -c 'import pytest' 2>/dev/null; then
    if compgen -G "wheels/pytest-*.whl" >/dev/null; then
        timeout 30 "$PYTHON" -m pip install --quiet --no-index --find-links wheels/ \
            --target "$WORK/site" pytest || die "pytest could not be installed from wheels/"
    else
        log "no pytest and none in wheels/: the CUDA test step will fail (see $0's header)"
    fi
fi
export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
"$PYTHON" -c 'import l3, sys; assert l3.__file__.startswith(sys.argv[1]), l3.__file__' \
    "$WORK/site" || die "import l3 does not find the installed wheel"

# --- machine
CUDA=$("$PYTHON" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
if [ "$CUDA" != 1 ] && [ "$L3_REQUIRE_CUDA" = 1 ]; then
    log "FAILED: L3_REQUIRE_CUDA=1 but torch sees no CUDA device (the CUDA steps fail)"
    printf 'cuda\tFAILED: L3_REQUIRE_CUDA=1 but torch sees no CUDA device\n' >>"$STATUS"
    FAILED=1
fi
ADAPTER=$("$PYTHON" -c 'import l3; print(l3.gpu_adapter() or "none")' 2>/dev/null || echo "error")
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') x $(nproc)"
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    else
        echo "nvidia-smi: not available"
    fi
    echo "l3 adapter: $ADAPTER"
    echo "wheel: $WHEEL"
    "$PYTHON" -c 'import sys, torch; print("python", sys.version.split()[0], "torch",
        torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' ||
        true
} 2>&1 | tee "$OUTDIR/machine.txt"

# --- 1. GPU decode steady state (l3-bench's GPU section only): images (fast, compact) and
# float arrays (lossless, error-bounded v3), each against a copy kernel of its output size
BIN=${L3_BENCH_BIN:-}
[ -z "$BIN" ] && [ -x .bench-bin/l3-bench ] && BIN=.bench-bin/l3-bench
[ -z "$BIN" ] && [ -x target/release/l3-bench ] && BIN=target/release/l3-bench
steady() {
    if [ -z "$BIN" ]; then
        echo "no l3-bench binary (.bench-bin/l3-bench): see the header of scripts/device-bench.sh"
        return 1
    fi
    "$BIN" --no-codecs --no-pipeline --no-dataset --no-scaling --no-synthetic --reps 5 \
        --gpu-steady-mb "$STEADY_MB" --json "$OUTDIR/gpu-steady.json" samples
    "$PYTHON" - "$OUTDIR/gpu-steady.json" "$FIGURES" <<'EOF'
import json, sys
gpu = json.load(open(sys.argv[1]))["gpu"]
rows = [r for r in gpu["rows"] if r["name"].startswith("steady state:")]
if not rows:
    sys.exit("no steady-state rows in l3-bench's report")
gbs = {r["name"]: r["bytes"] / r["time"]["median_s"] / 1e9 for r in rows}
# Each row against the copy kernel of its own output size (images and floats differ).
copy = {r["bytes"]: gbs[r["name"]] for r in rows if "copy kernel" in r["name"]}
with open(sys.argv[2], "a") as f:
    for name, v in gbs.items():
        r = next(r for r in rows if r["name"] == name)
        c = copy.get(r["bytes"])
        vs = f"{v / c:.1%} of the copy kernel" if c and "copy kernel" not in name else ""
        t = r["time"]
        # The spread of the repeats: the slowest and fastest against the median.
        spread = f"{t['reps']} repeats, {t['min_s'] / t['median_s'] - 1:+.0%}/{t['max_s'] / t['median_s'] - 1:+.0%} in time"
        vs = f"{vs}; {spread}" if vs else spread
        f.write(f"{name.removeprefix('steady state: ')} ({r['bytes'] / 1e6:.0f} MB)\t{v:.3g} GB/s\t{vs}\n")
EOF
}
export -f steady
export BIN PYTHON STEADY_MB OUTDIR FIGURES
step gpu-steady 90 bash -c steady

# --- 2. corpus and datasets
CORPUS=${L3_CORPUS:-}
CORPUS_FROM=""
if [ -n "$CORPUS" ]; then
    CORPUS_FROM="\$L3_CORPUS ($CORPUS)"
elif [ -d .bench-data/corpus ]; then
    CORPUS=.bench-data/corpus
    CORPUS_FROM="carried .bench-data/corpus"
else
    for images in ../shared/data/images shared/data/images; do
        if [ -d "$images/photo_lossless" ]; then
            CORPUS="$WORK/corpus"
            CORPUS_FROM="made from $images by scripts/make-loader-corpus.py"
            step corpus 60 "$PYTHON" scripts/make-loader-corpus.py "$CORPUS" --images "$images"
            break
        fi
    done
fi
if [ -z "$CORPUS" ]; then
    printf 'corpus\tFAILED: no images (no $L3_CORPUS, .bench-data/corpus, ../shared or shared/)\n' \
        >>"$STATUS"
    FAILED=1
    log "FAILED: no corpus: carry .bench-data/corpus (see the header of $0)"
else
    log "corpus: $CORPUS_FROM"
    step pack 45 "$PYTHON" -c '
import sys, l3
for profile in ("compact", "fast"):
    ds = l3.pack(sys.argv[1], f"{sys.argv[2]}/ds-{profile}", profile=profile)
    print(profile, len(ds), "records")
' "$CORPUS" "$WORK"
fi

# --- 3. loaders (one Python program, one mode per step)
cat >"$WORK/loaders.py" <<'EOF'
"""Loader throughput (images/s) for device-bench.sh: one warm-up epoch, then EPOCHS timed
ones; every row RandomResizedCrop(224) + flip + normalise, float32 NCHW, batch 64."""
import os, sys, time

import torch

mode, corpus, work, figures = sys.argv[1:5]
EPOCHS = int(os.environ.get("EPOCHS", "3"))
CORES = os.cpu_count() or 1
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def rate(name, epoch_batches, base=None):
    """Runs the warm-up epoch, then the timed ones; appends the row to the figures file (with
    the ratio to ``base`` images/s when given)."""
    first = time.perf_counter()
    for _ in epoch_batches(0):
        pass
    warm = time.perf_counter() - first
    n, t0 = 0, time.perf_counter()
    for e in range(1, EPOCHS + 1):
        for images in epoch_batches(e):
            assert images.shape[1:] == (3, 224, 224) and images.dtype == torch.float32
            n += images.shape[0]
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    note = "" if base is None else f"; {n / dt / base:.2f}x torchvision"
    line = f"{name}\t{n / dt:.0f} images/s\t{n} images in {dt:.2f} s (warm-up epoch {warm:.2f} s){note}"
    print(line.replace("\t", "  "))
    with open(figures, "a") as f:
        f.write(line + "\n")
    return n / dt


def l3_rows(profile, **options):
    from l3.torch import L3DataLoader, L3IterableDataset

    ds = L3IterableDataset(f"{work}/ds-{profile}", 64, seed=1, **options)
    loader = L3DataLoader(ds, num_workers=0)

    def epoch(e):
        loader.set_epoch(e)
        for b in loader:
            yield b["images"]

    return epoch


if mode == "cpu":
    import importlib.util

    tv_rate = None
    if importlib.util.find_spec("torchvision") is None:
        if os.environ.get("L3_REQUIRE_CUDA") == "1":
            sys.exit("torchvision is missing")
        print("torchvision missing: its row skipped")
        with open(figures, "a") as f:
            f.write(f"torchvision ImageFolder + PIL, {CORES} workers\tskipped\ttorchvision missing\n")
    else:
        from torchvision import datasets, transforms

        tf = transforms.Compose([
            transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
            transforms.ToTensor(), transforms.Normalize(MEAN, STD),
        ])
        folder = datasets.ImageFolder(corpus, transform=tf)
        tv = torch.utils.data.DataLoader(folder, batch_size=64, shuffle=True,
                                         num_workers=CORES, persistent_workers=True)

        def tv_epoch(e):
            for images, _ in tv:
                yield images

        tv_rate = rate(f"torchvision ImageFolder + PIL, {CORES} workers (persistent)", tv_epoch)
    for profile in ("compact", "fast"):
        rate(f"l3 {profile}, CPU path, {CORES} threads, 0 workers",
             l3_rows(profile, threads=CORES), tv_rate)
elif mode == "gpu":
    import l3
    from l3._handoff import choose_output

    print("l3 adapter:", l3.gpu_adapter(), "| default output:", choose_output("gpu", None))
    if not torch.cuda.is_available() and os.environ.get("L3_REQUIRE_CUDA") == "1":
        sys.exit("no CUDA but L3_REQUIRE_CUDA=1")
    if not torch.cuda.is_available():
        # The pinned-host hand-off still runs (on whatever adapter l3 has), fast profile only.
        rate("l3 fast, GPU path to host tensors (output=host; no CUDA)",
             l3_rows("fast", device="gpu", output="host"))
        print("no CUDA: the GPU path to CUDA tensors is skipped (output=host measured alone)")
        sys.exit(77)
    for profile in ("compact", "fast"):
        rate(f"l3 {profile}, GPU path to CUDA tensors (output=cuda)",
             l3_rows(profile, device="gpu", output="cuda"))
        host = l3_rows(profile, device="gpu", output="host")

        def to_cuda(e, host=host):
            for images in host(e):
                yield images.to("cuda", non_blocking=True)

        rate(f"l3 {profile}, GPU path to pinned host, then .cuda() (output=host)", to_cuda)
EOF
if [ -n "$CORPUS" ]; then
    step loader-cpu 100 "$PYTHON" "$WORK/loaders.py" cpu "$CORPUS" "$WORK" "$FIGURES"
    step loader-gpu 75 "$PYTHON" "$WORK/loaders.py" gpu "$CORPUS" "$WORK" "$FIGURES"
fi

# --- 3b. tensor records: the tensor loader's CPU and GPU paths over float fields
cat >"$WORK/tensors.py" <<'EOF2'
"""Tensor-record loader throughput (samples/s) for device-bench.sh. Data: SAMPLES samples of
three smooth float32 256x256 fields (h, u, v: random spectra falling as k^-3, seeded), packed
as input (h, u, v) and target (h), lossless and relative 1e-3. Each row: one warm-up epoch,
then EPOCHS timed ones; crop 128x128, flips, quarter turns, normalised, float32, batch 32."""
import os, sys, time

import numpy as np

import l3

work, figures = sys.argv[1:3]
EPOCHS = int(os.environ.get("EPOCHS", "3"))
SAMPLES = int(os.environ.get("TENSOR_SAMPLES", "1024"))
CORES = os.cpu_count() or 1
N = 256


def fields(seed):
    rng = np.random.default_rng(seed)
    k = np.fft.fftfreq(N) * N
    kk = np.sqrt(k[:, None] ** 2 + k[None, :] ** 2)
    amp = np.where(kk > 0, (kk + 1) ** -3.0, 0)
    out = []
    for _ in range(3):
        spec = amp * np.exp(2j * np.pi * rng.random((N, N)))
        f = np.fft.ifft2(spec).real
        out.append((f / np.abs(f).max()).astype(np.float32))
    return np.stack(out)


def samples():
    for i in range(SAMPLES):
        x = fields(i)
        yield {"input": x, "target": x[:1].copy()}


t0 = time.perf_counter()
for name, mode in (("lossless", "lossless"), ("rel-1e-3", {"relative": 1e-3})):
    out = l3.pack_arrays(samples(), f"{work}/tensors-{name}", modes=mode, samples_per_shard=128)
    print(name, out["records"], "records,", out["bytes"] / 1e6, "MB")
print(f"packed in {time.perf_counter() - t0:.1f} s")


def record(label, n, dt, warm):
    """One figure line: printed, and appended to the figures file."""
    line = f"{label}\t{n / dt:.0f} samples/s\t{n} samples in {dt:.2f} s (warm-up epoch {warm:.2f} s)"
    print(line.replace("\t", "  "))
    with open(figures, "a") as f:
        f.write(line + "\n")


def rate(label, path, **options):
    loader = l3.Loader(path, 32, crop=(128, 128), flips=True, rot90=True, normalize=True,
                       seed=1, end_epoch=EPOCHS + 1, threads=CORES, **options)
    first = None
    n = 0
    t_start = time.perf_counter()
    for b in loader:
        assert b["input"].shape[1:] == (3, 128, 128) and b["target"].shape[1:] == (1, 128, 128)
        if b["epoch"] == 0:
            # Timed from the warm-up epoch's last batch, as rate_torch is (the first timed
            # batch's own wait counts).
            first = time.perf_counter()
            warm = first - t_start
            continue
        n += len(b["samples"])
    dt = time.perf_counter() - first
    loader.close()
    record(label, n, dt, warm)


def rate_torch(label, path, output):
    """The same windows through l3.torch (L3DataLoader, in process), the GPU path handing
    every batch's arrays over by `output`: "cuda" (CUDA tensors over exported memory, no
    host round trip) or "host" (one pooled pinned buffer per batch)."""
    import torch
    from l3.torch import L3DataLoader, L3IterableDataset

    ds = L3IterableDataset(path, 32, crop=(128, 128), flips=True, rot90=True, normalize=True,
                           seed=1, threads=CORES, device="gpu", output=output)
    loader = L3DataLoader(ds)
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    n = 0
    t_start = time.perf_counter()
    for epoch in range(EPOCHS + 1):
        ds.set_epoch(epoch)
        for b in loader:
            assert b["input"].shape[1:] == (3, 128, 128)
            assert b["input"].device.type == ("cuda" if output == "cuda" else "cpu")
            if epoch > 0:
                n += len(b["samples"])
        if epoch == 0:
            sync()
            first = time.perf_counter()
            warm = first - t_start
    sync()
    dt = time.perf_counter() - first
    ds.close()
    record(label, n, dt, warm)


for name in ("lossless", "rel-1e-3"):
    path = f"{work}/tensors-{name}"
    rate(f"l3 tensors {name}, CPU path, {CORES} threads", path)
    rate(f"l3 tensors {name}, GPU path (read back into arrays)", path, device="gpu")
    for output in ("host", "cuda"):
        try:
            rate_torch(f"l3 tensors {name}, GPU path to {output} tensors (output={output})",
                       path, output)
        except Exception as e:  # no CUDA import on this machine: say so, go on
            print(f"l3 tensors {name}, output={output}: {type(e).__name__}: {e}")
EOF2
step tensors 180 "$PYTHON" "$WORK/tensors.py" "$WORK" "$FIGURES"

# --- 3c. the GPU decoders against the CPU's, bit for bit, through the tensor loader
cat >"$WORK/exact.py" <<'EOF2'
"""GPU decode = CPU decode, bit for bit, on this machine's adapter: tensor datasets of
lossless float32 / float16 / bfloat16 arrays and error-bounded ones (.l3f v1 for 2-D and
3-D, v3 for 4-D), lines past 65,535 values among them; every batch of the GPU
path (device="gpu", whole arrays, no augmentation) equals the CPU path's."""
import sys

import numpy as np

import l3

work, figures = sys.argv[1:3]
rng = np.random.default_rng(7)


def smooth(shape):
    f = rng.standard_normal(shape)
    for ax in range(len(shape)):
        f = np.cumsum(f, axis=ax)
    f += rng.standard_normal(shape) * 0.01 * f.std()
    return f.astype(np.float32)


def with_specials(a):
    flat = a.reshape(-1)
    flat[:: max(1, flat.size // 7)] = np.float32(-0.0)
    flat[3] = np.float32("nan")
    return a


cases = {
    "lossless-f32-2d": ([{"x": with_specials(smooth((96, 80)))} for _ in range(6)], "lossless"),
    "lossless-f16-3d": ([{"x": smooth((4, 40, 48)).astype(np.float16)} for _ in range(6)], "lossless"),
    "lossless-f32-lines-1000003": ([{"x": smooth((1, 1_000_003))} for _ in range(2)], "lossless"),
    "lossless-f32-lines-65600": ([{"x": smooth((2, 65_600))} for _ in range(3)], "lossless"),
    "rel1e-3-2d": ([{"x": smooth((96, 80))} for _ in range(6)], {"relative": 1e-3}),
    "rel1e-2-3d": ([{"x": smooth((6, 40, 48))} for _ in range(4)], {"relative": 1e-2}),
    "rel1e-3-lines-200000": ([{"x": smooth((1, 200_000))} for _ in range(3)], {"relative": 1e-3}),
    "rel1e-4-4d": ([{"x": smooth((3, 4, 20, 24))} for _ in range(4)], {"relative": 1e-4}),
}
try:
    import ml_dtypes

    cases["lossless-bf16-2d"] = (
        [{"x": smooth((64, 72)).astype(ml_dtypes.bfloat16)} for _ in range(5)], "lossless")
except ImportError:
    print("no ml_dtypes: the bfloat16 case is left out")

failed = 0
for name, (samples, mode) in cases.items():
    path = f"{work}/exact-{name}"
    l3.pack_arrays(samples, path, modes=mode, samples_per_shard=4, force=True)
    opts = dict(seed=1, end_epoch=1)
    bs = 2
    try:
        cpu = [np.asarray(b["x"]).tobytes() for b in l3.Loader(path, bs, device="cpu", **opts)]
        gpu = [np.asarray(b["x"]).tobytes() for b in l3.Loader(path, bs, device="gpu", **opts)]
        same = cpu == gpu and len(cpu) > 0
    except Exception as e:  # a refusal is a failure here too
        print(f"{name}: {type(e).__name__}: {e}")
        same = False
    failed += not same
    line = f"GPU = CPU bit for bit: {name}\t{'yes' if same else 'NO'}\t{len(samples)} records"
    print(line.replace("\t", "  "))
    with open(figures, "a") as f:
        f.write(line + "\n")
sys.exit(1 if failed else 0)
EOF2
step exact 120 "$PYTHON" "$WORK/exact.py" "$WORK" "$FIGURES"

# --- 4. the CUDA interop tests (fail, not skip, where CUDA is required)
cuda_tests() {
    if [ "$CUDA" != 1 ] && [ "$L3_REQUIRE_CUDA" != 1 ]; then
        echo "no CUDA: python/tests/test_cuda.py's CUDA half would skip; step skipped"
        return 77
    fi
    cd python/tests
    CI=true "$PYTHON" -m pytest -q -rs -p no:cacheprovider test_cuda.py
}
export -f cuda_tests
export CUDA
step cuda-tests 60 bash -c cuda_tests

# --- 5. training memory on CUDA: compress_activations' CUDA test, then the training
# benchmark (examples/train_memory.py --device cuda): peak CUDA memory, step time, val loss
gpu_encode() {
    set -o pipefail
    "$PYTHON" bench/gpu_encode_speed.py --shape 64,64,128,128 --repeats 5 | tee "$OUTDIR/gpu_encode.txt"
    while IFS= read -r line; do
        case $line in
            *" s, "* | *" ms, "*) printf '%s\t%s\t\n' "encode: ${line%%:*}" "${line#*: }" >>"$FIGURES" ;;
            *"copy: "*) printf '%s\t%s\t\n' "encode: ${line%%:*}" "${line#*: }" >>"$FIGURES" ;;
        esac
    done <"$OUTDIR/gpu_encode.txt"
}
export -f gpu_encode
step gpu-encode 120 bash -c gpu_encode

activations_tests() {
    if [ "$CUDA" != 1 ]; then
        echo "no CUDA: the CUDA activation test would skip; step skipped"
        [ "$L3_REQUIRE_CUDA" = 1 ] && return 1
        return 77
    fi
    cd python/tests
    CI=true "$PYTHON" -m pytest -q -rs -p no:cacheprovider test_activations.py
}
export -f activations_tests
step activations-tests 90 bash -c activations_tests

activations_train() {
    if [ "$CUDA" != 1 ]; then
        echo "no CUDA: step skipped"
        [ "$L3_REQUIRE_CUDA" = 1 ] && return 1
        return 77
    fi
    "$PYTHON" examples/train_memory.py --device cuda --train-steps "${TRAIN_STEPS:-20}" \
        --sim-steps 120 --size 192 --crop 128 --batch-size 16 --width 64 --depth 12 \
        --threads "$(nproc)" ${ARMS:+--arms "$ARMS"} --out "$OUTDIR/train_memory.md"
    while IFS= read -r line; do
        case $line in
            "| arm "*) ;;
            "| "[a-z]*) printf '%s\t%s\t%s\n' "train_memory $(echo "$line" | cut -d'|' -f2)" \
                "$(echo "$line" | cut -d'|' -f3,6,7 | tr -s ' ')" "saved MB | CUDA MB | step ms" \
                >>"$FIGURES" ;;
        esac
    done <"$OUTDIR/train_memory.md"
}
export -f activations_train
export OUTDIR FIGURES
step activations-train 250 bash -c activations_train

# --- summary
SUMMARY="$OUTDIR/summary.md"
{
    echo "# l3 device run, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- l3 adapter: $ADAPTER"
    echo "- GPU: $(command -v nvidia-smi >/dev/null &&
        nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n1 || echo none)"
    echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') x $(nproc)"
    echo "- CUDA (torch): $([ "$CUDA" = 1 ] && echo yes || echo "no CUDA")"
    echo "- corpus: ${CORPUS_FROM:-none}; wheel: $(basename "$WHEEL")"
    echo "- GPU steady state: l3-bench, samples/ repeated to ${STEADY_MB} MB decoded, GPU timestamps;"
    echo "  loaders: 1 warm-up + ${EPOCHS} timed epochs, RandomResizedCrop(224) + flip + normalise, batch 64"
    echo
    echo "| measurement | figure | note |"
    echo "|---|---|---|"
    while IFS=$'\t' read -r name figure note; do
        echo "| $name | $figure | ${note:-} |"
    done <"$FIGURES"
    echo
    echo "| step | status |"
    echo "|---|---|"
    while IFS=$'\t' read -r name status; do
        echo "| $name | $status |"
    done <"$STATUS"
    echo
    echo "total: $(($(date +%s) - START)) s"
} >"$SUMMARY"
echo
cat "$SUMMARY"
if [ "$FAILED" != 0 ]; then
    log "FAILED: some steps failed (see the table above and $OUTDIR/*.log)"
    exit 1
fi
log "done; summary in $SUMMARY"
