#!/usr/bin/env bash
# Installs a built l3 wheel (scripts/build-wheel.sh) into a fresh virtualenv, with NumPy, and
# runs python/tests/smoke_wheel.py against it as a user would have it: PATH holds only the
# virtualenv and the system's /usr/bin and /bin (no cargo, no rustc: the wheel must not need
# a Rust build), and the test runs from a temporary folder outside the repository, so
# `import l3` can only be the installed wheel. Fails if cargo or rustc is still found, if l3
# is imported from anywhere but the virtualenv, or if any smoke step fails.
#
#   scripts/wheel-smoke.sh target/wheels/l3-*.whl
#
# The virtualenv is target/wheel-smoke-venv (L3_SMOKE_VENV), made anew each run.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ne 1 ] || [ ! -f "$1" ]; then
  echo "usage: $0 WHEEL" >&2
  exit 2
fi
wheel="$(realpath "$1")"
smoke="$(realpath python/tests/smoke_wheel.py)"
venv="$(realpath -m "${L3_SMOKE_VENV:-target/wheel-smoke-venv}")"
# The interpreter the virtualenv is made from (a pyenv or /usr/local Python may live outside
# /usr/bin; the virtualenv itself then needs nothing else from PATH).
python="$(command -v python3)"

rm -rf "$venv"
"$python" -m venv "$venv"
# The environment as it is (proxies, pip's settings, WGPU_BACKEND) but for PATH, and without
# PYTHONPATH or an active virtualenv that could put another l3 first.
run_clean() {
  env -u PYTHONPATH -u VIRTUAL_ENV -u PYTHONHOME PATH="$venv/bin:/usr/bin:/bin" "$@"
}
if run_clean bash -c 'command -v cargo || command -v rustc'; then
  echo "error: a Rust toolchain is on the clean PATH; the smoke test would not show the" \
    "wheel installs without one" >&2
  exit 1
fi
run_clean "$venv/bin/python" -m pip install -q --upgrade pip
# --only-binary: l3 comes from this wheel and NumPy from a wheel; nothing is built.
run_clean "$venv/bin/python" -m pip install -q --only-binary=:all: "$wheel" numpy

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$smoke" "$work/"
cd "$work"
where="$(run_clean "$venv/bin/python" -c 'import l3, os; print(os.path.realpath(l3.__file__))')"
case "$where" in
  "$venv"/*) ;;
  *)
    echo "error: l3 was imported from $where, not from the virtualenv $venv" >&2
    exit 1
    ;;
esac
run_clean "$venv/bin/python" smoke_wheel.py
