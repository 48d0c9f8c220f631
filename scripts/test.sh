#!/usr/bin/env bash
# Installs what the tests need (Mesa's lavapipe software Vulkan driver and Python's venv, when
# run as root on Debian/Ubuntu and missing; then, in a virtualenv under target/, maturin,
# NumPy, pytest, Pillow, PyTorch, Ray, h5py, netCDF4, zarr and hdf5plugin) and runs the whole
# test suite: the Rust tests in release mode, then the Python package built from this checkout
# (`pip install .`) and its pytest suite.
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
# Library, CLI, integration tests, examples (built) and doc tests; benchmarks stay out of CI.
cargo test --release --no-fail-fast
# The core library alone (no wgpu, no image crate) builds and passes its unit tests.
cargo test --release -p l3 --no-default-features --lib

# The Python package: built from this checkout into a fresh virtualenv, then its tests (the
# PyTorch and Ray ones included: installing torch from PyPI takes about 2 minutes and 5 GB
# here, ray 30 s).
venv="$(realpath -m "${L3_PYTHON_VENV:-target/python-venv}")"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
# h5py, netCDF4, zarr and hdf5plugin (binary wheels for CPython 3.11 on x86-64 Linux): the
# scientific sources' tests write and read real HDF5, NetCDF-4 and Zarr files.
"$venv/bin/pip" install -q maturin numpy pytest pillow torch ray h5py netCDF4 zarr hdf5plugin
"$venv/bin/pip" install -q .
# From the tests' folder, so `import l3` is the installed package, not python/l3.
(cd python/tests && "$venv/bin/python" -m pytest -q .)
