#!/usr/bin/env bash
# Seeds for the targets gpu_plan, shard_file, manifest, cli_inputs and image_hook (the other
# targets' seeds: README.md). Needs python3 (standard library only) and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
l3=target/release/l3
cargo build --release -q
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
corpus=fuzz/corpus
mkdir -p $corpus/{gpu_plan,shard_file,manifest,cli_inputs,image_hook}

# Two fields (a smooth one, one with NaN and infinity runs) as .f32 + sidecars.
python3 - "$work" <<'PY'
import json, math, struct, sys
d = sys.argv[1]
smooth = [math.sin(x / 7) + math.cos(y / 5) for y in range(48) for x in range(40)]
noisy = [math.sin(i * 12.9898) * 43758.5453 % 1 for i in range(3 * 20 * 30)]
noisy[0:5] = [float("nan")] * 5
noisy[63] = float("inf")
for name, values, shape in (("smooth", smooth, [48, 40]), ("noisy", noisy, [3, 20, 30])):
    open(f"{d}/{name}.f32", "wb").write(struct.pack(f"<{len(values)}f", *values))
    json.dump({"shape": shape}, open(f"{d}/{name}.json", "w"))
PY
$l3 encode-field "$work/smooth.f32" --relative 1e-3 -o "$work/smooth.l3f" >/dev/null
$l3 encode-field "$work/noisy.f32" --max-error 0.01 -o "$work/noisy.l3f" >/dev/null
$l3 decode-field "$work/noisy.l3f" -o "$work/noisy.npy" >/dev/null
$l3 pack samples -o "$work/ds" --records-per-shard 2 --levels 3 >/dev/null
$l3 encode samples -o "$work/l3" --quiet --profile compact

python3 - "$work" "$corpus" <<'PY'
import glob, os, random, struct, sys
work, corpus = sys.argv[1:]
def put(target, name, data):
    open(f"{corpus}/{target}/{name}", "wb").write(data)
s = open(f"{work}/smooth.l3f", "rb").read()
n = open(f"{work}/noisy.l3f", "rb").read()
# gpu_plan: mode (0 fields, 1 levels, 2 augment), binding and buffer exponents, alignment.
for i, (a, b) in enumerate(((n, s), (s, n), (n, n))):
    for lim in (12, 20):
        put("gpu_plan", f"fields{i}_{lim}", bytes([0, lim, 1, 6]) + struct.pack("<H", len(a)) + a + b)
shards = sorted(glob.glob(f"{work}/ds/*.l3s"))
for i, f in enumerate(shards):
    d = open(f, "rb").read()
    for level in (0, 1, 2):
        put("gpu_plan", f"levels{i}_{level}", bytes([1, 20, 0, 6, level]) + d)
    # shard_file: gap and run-size exponents, then the shard.
    put("shard_file", f"shard{i}", bytes([12, 20]) + d)
    put("shard_file", f"shard{i}_small_runs", bytes([0, 8]) + d)
r = random.Random(3)
for i in range(8):
    put("gpu_plan", f"augment{i}", bytes([2, 20, 0, 6]) + bytes(r.randrange(256) for _ in range(8 + 14 * 4)))
put("manifest", "manifest.json", open(f"{work}/ds/manifest.json", "rb").read())
# cli_inputs: 0 .npy, 1 sidecar + raw data, 2 CSV labels, 3 JSON-lines labels.
put("cli_inputs", "npy", b"\x00" + open(f"{work}/noisy.npy", "rb").read())
side = open(f"{work}/smooth.json", "rb").read()
put("cli_inputs", "sidecar", b"\x01" + struct.pack("<H", len(side)) + side + open(f"{work}/smooth.f32", "rb").read())
put("cli_inputs", "csv", b"\x02path,label\na.png,cat\nb/c.png,3\n")
put("cli_inputs", "jsonl", b'\x03{"path": "a.png", "label": "cat", "meta": {"x": 1}}\n{"path": "b/c.png", "label": 3}\n')
for f in glob.glob(f"{work}/l3/*.l3"):
    put("image_hook", os.path.basename(f), open(f, "rb").read())
PY
ls $corpus/{gpu_plan,shard_file,manifest,cli_inputs,image_hook} | grep -c .
