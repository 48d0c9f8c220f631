#!/usr/bin/env bash
# Runs l3-bench on a machine with an NVIDIA GPU (or any GPU) and writes its report under $OUT
# when set (else target/device-bench/). At most 200 s of build plus 240 s of benchmark: under 8 minutes.
#
#   scripts/device-bench.sh [FILES|FOLDERS...]      (default: the bundled samples/)
#
# The binary: $L3_BENCH_BIN if set, else .bench-bin/l3-bench if present (a prebuilt, stripped
# copy carried from the build machine), else it is built here with cargo (needs the crates
# already in ~/.cargo or network access to crates.io). To prepare a carried binary on the build
# machine (x86-64 Linux, same as the device machine):
#
#   cargo build --release -p l3-bench -p l3-cli
#   mkdir -p .bench-bin && strip -o .bench-bin/l3-bench target/release/l3-bench
#   strip -o .bench-bin/l3 target/release/l3
#   echo /.bench-bin/ >> .git/info/exclude
#
# Vulkan loader: a bare machine may lack libvulkan.so.1 (`ldconfig -p | grep libvulkan` prints
# nothing). The caller then brings Debian's loader packages: on the build machine, in the repo
# root, once:
#
#   echo /.gl/ >>.git/info/exclude; mkdir -p .gl /tmp/amd64/partial
#   o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
#   apt-get $o update; (cd .gl && apt-get $o download libvulkan1)
#
# and carries `.gl` (and `.bench-bin`) to the device machine; this script unpacks .gl/*.deb
# into / when the loader is missing. If wgpu finds no NVIDIA adapter, it sets VK_DRIVER_FILES
# to the NVIDIA ICD under /usr/local/nvidia or /usr/share/vulkan when one exists there.
set -euo pipefail
cd "$(dirname "$0")/.."

OUTDIR=${OUT:-target/device-bench}
mkdir -p "$OUTDIR"
export WGPU_BACKEND=${WGPU_BACKEND:-vulkan}
REPS=${REPS:-5}
START=$(date +%s)

log() { echo "[device-bench +$(($(date +%s) - START))s] $*" >&2; }

# --- Vulkan loader
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

# --- binary
BIN=${L3_BENCH_BIN:-}
if [ -z "$BIN" ]; then
    if [ -x .bench-bin/l3-bench ]; then
        BIN=.bench-bin/l3-bench
    elif command -v cargo >/dev/null; then
        log "building l3-bench (release)"
        timeout 200 cargo build --release -p l3-bench
        BIN=target/release/l3-bench
    else
        echo "no l3-bench binary (.bench-bin/l3-bench) and no cargo: see the header of $0" >&2
        exit 2
    fi
fi

# --- machine
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') x $(nproc)"
    command -v nvidia-smi >/dev/null &&
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader ||
        echo "nvidia-smi: not available"
    echo "adapters:"
    "$BIN" --list-adapters || true
} 2>&1 | tee "$OUTDIR/machine.txt"

# --- benchmark
if [ $# -eq 0 ]; then set -- samples; fi
log "running l3-bench on $* (reps $REPS)"
set -o pipefail
# The GPU steady state (1 GB batches of the inputs repeated, kernels against a copy kernel
# of the same size) runs by default on a hardware GPU; the scaling run stops at 16 MP here
# (the 64 MP row is a CPU figure, measured on the build machine).
timeout 240 "$BIN" --reps "$REPS" --per-image --gpu-steady-mb 1024 --scaling-mp 1,4,16 "$@" \
    --json "$OUTDIR/device-bench.json" --markdown "$OUTDIR/device-bench.md" \
    2>&1 | tee "$OUTDIR/device-bench.txt"
# --- loader: CPU and GPU paths over the same packed samples (the `l3` binary: $L3_BIN,
# .bench-bin/l3 or target/release/l3; skipped when there is none).
L3=${L3_BIN:-}
[ -z "$L3" ] && [ -x .bench-bin/l3 ] && L3=.bench-bin/l3
[ -z "$L3" ] && [ -x target/release/l3 ] && L3=target/release/l3
if [ -n "$L3" ]; then
    DS=$(mktemp -d)
    "$L3" pack samples -o "$DS" --levels 3 -q
    for mode in "" "--gpu" "--gpu --no-crop-window"; do
        log "l3 bench-loader $mode"
        timeout 90 "$L3" bench-loader "$DS" --epochs 3 --batch-size 32 $mode \
            2>&1 | tee -a "$OUTDIR/loader.txt" || true
    done
    # The same records with 128-px patches: faster on CPUs; what do the GPU's crops say?
    "$L3" pack samples -o "$DS" --levels 3 --patch-size 128 --force -q
    for mode in "" "--gpu"; do
        log "l3 bench-loader $mode, 128-px patches"
        timeout 60 "$L3" bench-loader "$DS" --epochs 3 --batch-size 32 $mode \
            2>&1 | tee -a "$OUTDIR/loader.txt" || true
    done
    rm -rf "$DS"
else
    log "no l3 binary: loader rows skipped"
fi
log "done; report in $OUTDIR"
