#!/usr/bin/env bash
# Builds the `l3` Python package as one wheel for every CPython >= 3.9 on x86-64 Linux (abi3,
# pyo3's abi3-py39 feature) tagged manylinux_2_28 (glibc 2.28 or later: RHEL/Alma/Rocky 8,
# Debian 10, Ubuntu 18.10 and later), release mode, into target/wheels/ or the folder given as
# the first argument. Prints the wheel's path as the last line of its output (on stdout; the
# build's own output goes to stderr), so `wheel="$(scripts/build-wheel.sh | tail -n1)"`.
#
# No Docker: maturin links with zig (`--zig`, the ziglang package from PyPI), which links
# against glibc 2.28's symbol versions whatever the build machine's glibc is. The extension
# needs only libc, libm, libpthread, libdl and the loader (ld-linux): wgpu loads Vulkan
# (libvulkan.so.1) at run time with dlopen, so the wheel runs without a GPU driver and uses
# one when it is there. After the build, auditwheel (its own policy check, not maturin's)
# must find the wheel consistent with manylinux_2_28 or an older tag, else the script fails.
#
# Needs Python 3 with venv and a Rust toolchain (rust-version in python/Cargo.toml); maturin,
# ziglang and auditwheel are installed into a virtualenv under target/ (L3_WHEEL_VENV).
set -euo pipefail
cd "$(dirname "$0")/.."

out="$(realpath -m "${1:-target/wheels}")"
venv="$(realpath -m "${L3_WHEEL_VENV:-target/wheel-venv}")"
# ziglang below 0.14: zig 0.14 compiles unoptimised C with UBSan, whose runtime then fails to
# link (reported against maturin's --zig builds, PyO3/maturin-action#335); 0.13 is what this
# script was tested with (the C of aws-lc-sys, the S3 client's TLS, is compiled by zig too).
tools=('maturin>=1.9.4,<2' 'ziglang>=0.13,<0.14' 'auditwheel>=6')

# The build tools' virtualenv, made once and kept (reinstalled when a tool is missing).
if ! "$venv/bin/python" -c 'import ziglang, auditwheel' >/dev/null 2>&1 \
  || [ ! -x "$venv/bin/maturin" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip >&2
  "$venv/bin/pip" install -q "${tools[@]}" >&2
fi

# Old l3 wheels in the output folder go first, so the one left is this build's.
mkdir -p "$out"
rm -f "$out"/l3-*.whl
# maturin finds zig as `python -m ziglang` with the first python on PATH: the venv's.
# --strip: no symbols or debug info in the extension (the release profile keeps debug = 1);
# the wheel is then about 9 MB.
PATH="$venv/bin:$PATH" maturin build --release --strip --zig --compatibility manylinux_2_28 \
  --out "$out" >&2

wheels=("$out"/l3-*.whl)
if [ ${#wheels[@]} -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
  echo "error: expected one l3 wheel in $out, found: ${wheels[*]}" >&2
  exit 1
fi
wheel="${wheels[0]}"
case "$(basename "$wheel")" in
  *-cp39-abi3-*manylinux_2_28_x86_64*.whl) ;;
  *)
    echo "error: $wheel is not tagged cp39-abi3 manylinux_2_28_x86_64" >&2
    exit 1
    ;;
esac

# auditwheel's check: the extension's glibc symbol versions and linked libraries are within
# a manylinux policy, reported as the most compatible tag the wheel is consistent with.
show="$("$venv/bin/auditwheel" show "$wheel")"
echo "$show" >&2
glibc="$(echo "$show" | tr '\n' ' ' \
  | grep -o 'consistent with the *following platform tag: *"manylinux_2_[0-9]*' \
  | grep -o '[0-9]*$' || true)"
if [ -z "$glibc" ] || [ "$glibc" -gt 28 ]; then
  echo "error: auditwheel does not find $wheel consistent with manylinux_2_28" >&2
  exit 1
fi
echo "$wheel"
