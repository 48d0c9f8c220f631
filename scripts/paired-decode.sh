#!/usr/bin/env bash
# Paired CPU decode timing of two builds on the same files, for before/after figures on a
# machine whose speed drifts (shared VMs): the two binaries alternate, one thread pinned to
# one core, and each keeps its best single-thread speed over ROUNDS rounds of 5 decodes.
#
#   scripts/paired-decode.sh OLD_CPU_DECODE NEW_CPU_DECODE ROUNDS FILE.l3...
#
# OLD/NEW are builds of `examples/cpu_decode` (`cargo build --release --example cpu_decode`,
# then copy target/release/examples/cpu_decode aside per commit). Prints per file the best
# MP/s of each and new / old.
set -euo pipefail
old=$1 new=$2 rounds=$3
shift 3
best() { # binary file -> best single-thread MP/s of one run of 5 decodes
    # The whole output first: builds before 47d184e panic when their stdout closes early.
    local out
    out=$(taskset -c 0 "$1" "$2" 5 2>/dev/null)
    printf '%s\n' "$out" | sed -n -E '1s/.*: ([0-9.]+) MP.*/\1/p'
}
for f in "$@"; do
    bo=0 bn=0
    for _ in $(seq "$rounds"); do
        o=$(best "$old" "$f")
        n=$(best "$new" "$f")
        bo=$(echo "if ($o > $bo) $o else $bo" | bc)
        bn=$(echo "if ($n > $bn) $n else $bn" | bc)
    done
    printf "%-45s old %8.1f  new %8.1f MP/s  new/old %.3f\n" "$(basename "$f")" "$bo" "$bn" \
        "$(echo "$bn / $bo" | bc -l)"
done
