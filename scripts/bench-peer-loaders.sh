#!/usr/bin/env bash
# The l3 loader against torchvision, MosaicML Streaming and WebDataset, side by side in one run
# on one corpus with one augmentation (bench/peer_loaders.py says what is measured and how).
# Downloads from PyPI and runs for minutes: not part of CI (scripts/test.sh).
#
#   scripts/bench-peer-loaders.sh [--venv DIR] [--wheel L3.whl] [--l3-bin PATH] [--skip-install]
#                                 [--epochs 2] [--workers 2] [--batch-size 64] [--corpus DIR]
#                                 [--out FILE.md] [--rounds 1] [--l3-workers 0,2] ...
#
# --venv: the virtualenv (default target/peer-loaders/venv; created if missing, else reused);
#   pip installs torch, torchvision, mosaicml-streaming, webdataset, pillow and numpy into it
#   (extra pip arguments in $PEER_PIP_ARGS, e.g. "--index-url https://download.pytorch.org/whl/cpu"),
#   then l3 from --wheel, or from a wheel built here with `maturin build --release`.
# --skip-install: use the venv as it is (nothing is installed).
# --l3-bin: the `l3` CLI for the per-stage split (`l3 bench-loader`); default: built here with
#   `cargo build --release -p l3-cli` (no split when there is no cargo).
# Every other option goes to bench/peer_loaders.py (`--help` lists them). The report: a
# markdown table on stdout and in --out (default target/peer-loaders/report.md), with a .json.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=target/peer-loaders/venv
WHEEL=
L3_BIN=
SKIP_INSTALL=0
PASS=()
while [ $# -gt 0 ]; do
    case $1 in
        --venv) VENV=${2:?--venv needs a folder}; shift 2 ;;
        --wheel) WHEEL=${2:?--wheel needs a path}; shift 2 ;;
        --l3-bin) L3_BIN=${2:?--l3-bin needs a path}; shift 2 ;;
        --skip-install) SKIP_INSTALL=1; shift ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
            exec python3 bench/peer_loaders.py --help ;;
        *) PASS+=("$1"); shift ;;
    esac
done

log() { echo "[bench-peer-loaders $(date +%H:%M:%S)] $*" >&2; }

if [ "$SKIP_INSTALL" = 0 ]; then
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating $VENV"
        python3 -m venv "$VENV"
    fi
    log "installing the peers into $VENV (reused when present)"
    # shellcheck disable=SC2086
    "$VENV/bin/pip" install -q ${PEER_PIP_ARGS:-} torch torchvision mosaicml-streaming \
        webdataset pillow numpy
    if [ -z "$WHEEL" ]; then
        log "building the l3 wheel (maturin build --release)"
        "$VENV/bin/pip" install -q "maturin>=1.9.4,<2"
        wheels=target/peer-loaders/wheels
        rm -rf "$wheels"
        "$VENV/bin/maturin" build --release -m python/Cargo.toml -o "$wheels"
        WHEEL=$(ls -t "$wheels"/l3-*.whl | head -1)
    fi
    log "installing $WHEEL"
    "$VENV/bin/pip" install -q --force-reinstall --no-deps "$WHEEL"
elif [ ! -x "$VENV/bin/python" ]; then
    echo "--skip-install: no virtualenv at $VENV" >&2
    exit 2
fi

if [ -z "$L3_BIN" ]; then
    if command -v cargo >/dev/null; then
        log "building the l3 CLI (cargo build --release -p l3-cli)"
        cargo build --release -p l3-cli
        L3_BIN=${CARGO_TARGET_DIR:-target}/release/l3
    else
        log "no cargo and no --l3-bin: the per-stage split is left out"
    fi
fi
if [ -n "$L3_BIN" ]; then
    PASS+=(--l3-bin "$L3_BIN")
fi

exec "$VENV/bin/python" bench/peer_loaders.py "${PASS[@]}"
