#!/usr/bin/env bash
# Lists the sha256 of every file the encoder makes of the shared images, in both profiles and
# at patch sizes 32, 64 and 128, so a refactor can show its encoder output is byte-identical:
#   scripts/encoder-hashes.sh OLD_L3_BINARY > before.txt
#   scripts/encoder-hashes.sh target/release/l3 > after.txt && cmp before.txt after.txt
# Data: $L3_TEST_DATA, else ../shared/data.
set -euo pipefail
bin=$1
data=${L3_TEST_DATA:-$(dirname "$0")/../../shared/data}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for profile in fast compact; do
  for patch in 64 32 128; do
    for set in images pngsuite testpngs; do
      # Files the image crate cannot read fail individually; the listing shows what encoded.
      "$bin" encode -q --no-verify --profile "$profile" --patch-size "$patch" \
        -o "$tmp/$profile-$patch/$set" "$data/$set" >/dev/null 2>&1 || true
    done
  done
done
(cd "$tmp" && find . -type f -name '*.l3' -print0 | sort -z | xargs -0 sha256sum)
