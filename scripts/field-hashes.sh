#!/usr/bin/env bash
# Lists the sha256 of every file the float encoders make of the shared float32 arrays
# (lossless, error-bounded v1 and v3 at absolute and relative bounds), so a refactor can show
# its float encoder output is byte-identical:
#   scripts/field-hashes.sh OLD_L3_BINARY > before.txt
#   scripts/field-hashes.sh target/release/l3 > after.txt && cmp before.txt after.txt
# Data: $L3_TEST_DATA, else ../shared/data.
set -euo pipefail
bin=$1
data=${L3_TEST_DATA:-$(dirname "$0")/../../shared/data}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$data"/float32/*.f32; do
  name=$(basename "$f" .f32)
  cp "$f" "$tmp/"
  # The CLI's sidecar holds shape, dtype and fill value only (the shared ones say more).
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
json.dump({k: d[k] for k in ("shape", "dtype", "fill_value") if k in d}, open(sys.argv[2], "w"))' \
    "$data/float32/$name.json" "$tmp/$name.json"
  src="$tmp/$name.f32"
  run() { "$bin" encode-field "$src" -o "$tmp/$name.$1.l3f" "${@:2}" >/dev/null 2>&1 || echo "$name $1: refused"; }
  run lossless --lossless
  for b in 1e-2 1e-4; do
    run "v1-abs$b" --max-error "$b" --format v1
    run "v3-abs$b" --max-error "$b" --format v3
  done
  for r in 1e-2 1e-3 1e-4; do
    run "v1-rel$r" --relative "$r" --format v1
    run "v3-rel$r" --relative "$r" --format v3
  done
done
(cd "$tmp" && find . -type f -name '*.l3f' -print0 | sort -z | xargs -0 sha256sum)
