#!/usr/bin/env bash
# Installs what the tests need (Mesa's lavapipe software Vulkan driver, when run as root on
# Debian/Ubuntu and missing) and runs the whole test suite in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 \
  || ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing lavapipe (mesa-vulkan-drivers) and the Vulkan loader"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y mesa-vulkan-drivers libvulkan1
  else
    echo "warning: lavapipe not installed and not root; GPU tests need a Vulkan driver" >&2
  fi
fi

# Force Vulkan so CI never silently falls back to another backend.
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"
# Library, CLI, integration tests, examples (built) and doc tests; benchmarks stay out of CI.
cargo test --release --no-fail-fast
# The core library alone (no wgpu, no image crate) builds and passes its unit tests.
cargo test --release -p l3 --no-default-features --lib
