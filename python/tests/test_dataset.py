"""Datasets from Python: pack (folder classes, levels, resume), open and read at every level,
shards from arrays, manifests, and corrupt input."""

import json

import numpy as np
import pytest

import l3


def test_open_dataset_honours_limits(dataset3):
    """An image dataset opened through `open_dataset` or `Dataset` is bound by `limits` (its
    shards' indexes are larger than 64 bytes), like a tensor dataset."""
    tiny = l3.Limits(max_input_bytes=64)
    for opener in (l3.open_dataset, l3.Dataset):
        with pytest.raises(l3.LimitsError):
            opener(dataset3, limits=tiny)
    assert isinstance(l3.open_dataset(dataset3, limits=l3.Limits()), l3.Dataset)


def test_pack_and_read(dataset3, class_tree, sample_paths):
    ds = l3.open_dataset(dataset3)
    assert len(ds) == len(sample_paths)
    assert ds.levels == 3
    assert ds.classes == ["a", "b"]
    classes, jobs = l3.plan_pack(class_tree, records_per_shard=2)
    records = [r for _, rs in jobs for r in rs]
    assert [ds.record(i)["key"] for i in range(len(ds))] == [r[0] for r in records]
    labels = ds.labels
    assert labels.dtype == np.int64 and list(labels) == [
        -1 if r[2] is None else r[2] for r in records
    ]
    for i, (key, path, label, _) in enumerate(records):
        image, got_label = ds[i]
        assert got_label == (-1 if label is None else label)
        assert np.array_equal(image, l3.imread(path)), key
        rec = ds.record(i)
        assert (rec["height"], rec["width"]) == image.shape[:2]
        assert rec["class_name"] == (None if label is None else classes[label])
        assert len(rec["level_bytes"]) == 3
        # Lower levels are the image's lattice at stride 2 and 4.
        for level, stride in ((1, 2), (0, 4)):
            low = ds.read(i, level=level)
            assert np.array_equal(low, image[::stride, ::stride]), (key, level)
    assert np.array_equal(ds[-1][0], ds[len(ds) - 1][0])
    with pytest.raises(IndexError):
        ds[len(ds)]
    with pytest.raises(l3.ParameterError, match="level"):
        ds.read(0, level=3)


def test_rerun_keeps_complete_shards(tmp_path, class_tree):
    out = tmp_path / "ds"
    l3.pack(class_tree, out, records_per_shard=3)
    shards = sorted(out.glob("*.l3s"))
    before = {p: p.stat().st_mtime_ns for p in shards}
    # A crash that lost one shard and the manifest: the rerun rewrites only that shard.
    shards[1].unlink()
    (out / "manifest.json").unlink()
    _, jobs = l3.plan_pack(class_tree, records_per_shard=3)
    results = [l3.write_shard(out / name, records) for name, records in jobs]
    assert [r["written"] for r in results] == [i == 1 for i in range(len(jobs))]
    for p in shards:
        if p != shards[1]:
            assert p.stat().st_mtime_ns == before[p]
    l3.write_manifest(out, [r["file"] for r in results], classes=["a", "b"])
    assert len(l3.open_dataset(out)) == sum(len(r) for _, r in jobs)


def test_shards_from_arrays(tmp_path):
    rng = np.random.default_rng(3)
    arrays = [rng.integers(0, 65535, (40 + i, 30, 3), dtype=np.uint16) for i in range(4)]
    records = [(f"field-{i}", a, i % 2, json.dumps({"i": i}).encode()) for i, a in enumerate(arrays)]
    info = l3.write_shard(tmp_path / "s0.l3s", records[:2], levels=2)
    assert info["written"] and info["records"] == 2
    l3.write_shard(tmp_path / "s1.l3s", records[2:], levels=2)
    l3.write_manifest(tmp_path, ["s0.l3s", "s1.l3s"], classes=["even", "odd"], levels=2)
    ds = l3.open_dataset(tmp_path)
    for i, a in enumerate(arrays):
        image, label = ds[i]
        assert np.array_equal(image, a) and label == i % 2
        assert json.loads(ds.record(i)["meta"]) == {"i": i}
    with pytest.raises(l3.ParameterError, match="label"):
        l3.write_shard(tmp_path / "bad.l3s", [("k", arrays[0], -2, None)])
    with pytest.raises(l3.ParameterError):
        l3.write_shard(tmp_path / "bad.l3s", [("k", np.zeros((3, 3), np.float64), None, None)])
    with pytest.raises(l3.FormatError, match="levels"):
        l3.write_manifest(tmp_path, ["s0.l3s"], levels=3)
    assert not (tmp_path / "bad.l3s").exists()


def test_error_bounded_pack(tmp_path, class_tree):
    ds = l3.pack(class_tree, tmp_path / "ds", levels=3, max_error=2)
    _, jobs = l3.plan_pack(class_tree)
    records = [r for _, rs in jobs for r in rs]
    changed = 0
    for i, (key, path, _, _) in enumerate(records):
        image, original = ds[i][0].astype(np.int64), l3.imread(path).astype(np.int64)
        assert image.shape == original.shape, key
        assert np.abs(image - original).max() <= 2, key
        changed += int(np.count_nonzero(image != original))
        # Lower levels: the bounded image's lattice.
        assert np.array_equal(ds.read(i, level=0), ds[i][0][::4, ::4]), key
    assert changed > 0
    with pytest.raises(l3.L3Error, match="max_error"):
        l3.write_shard(tmp_path / "bad.l3s", [records[0]], max_error=40000)


def test_corrupt_datasets_raise_clear_errors(tmp_path, class_tree):
    out = tmp_path / "ds"
    l3.pack(class_tree, out, records_per_shard=4)
    shard = sorted(out.glob("*.l3s"))[0]
    data = bytearray(shard.read_bytes())
    # Truncated index: the dataset does not open.
    shard.write_bytes(bytes(data[: len(data) - 7]))
    with pytest.raises(l3.FormatError):
        l3.open_dataset(out)
    # A flipped payload byte: opening works (the index is intact), reading that record fails.
    data[200] ^= 0xFF
    shard.write_bytes(bytes(data))
    ds = l3.open_dataset(out)
    with pytest.raises(l3.FormatError, match="crc|CRC|checksum"):
        for i in range(len(ds)):
            ds.read(i)
    (out / "manifest.json").write_text("{not json")
    with pytest.raises(l3.FormatError, match="manifest"):
        l3.open_dataset(out)
    with pytest.raises(l3.L3IOError):
        l3.open_dataset(tmp_path / "nowhere")


def test_rerun_rebuilds_shards_whose_files_or_options_changed(tmp_path, class_tree):
    import shutil

    from PIL import Image

    tree = tmp_path / "tree"
    shutil.copytree(class_tree, tree)
    _, jobs = l3.plan_pack(tree, records_per_shard=100)
    name, records = jobs[0]
    path = tmp_path / "out" / name
    assert l3.write_shard(path, records)["written"]
    assert not l3.write_shard(path, records)["written"]
    # Another option that changes the bytes: rebuilt, then kept.
    assert l3.write_shard(path, records, max_overhead=2.0)["written"]
    assert not l3.write_shard(path, records, max_overhead=2.0)["written"]
    # A source rewritten with other pixels under the same name: rebuilt, and the shard holds
    # the new pixels.
    src = records[0][1]
    pixels = np.asarray(Image.open(src))
    Image.fromarray(255 - pixels if pixels.dtype == np.uint8 else pixels // 2).save(src)
    assert l3.write_shard(path, records, max_overhead=2.0)["written"]
    l3.write_manifest(path.parent, [name], classes=["a", "b"])
    assert np.array_equal(l3.open_dataset(path.parent).read(0), np.asarray(Image.open(src)))
    # Arrays have no identity to compare: a shard with one is rebuilt on every call.
    arrays = [(k, np.asarray(Image.open(s)), label, meta) for k, s, label, meta in records]
    assert l3.write_shard(path, arrays)["written"]
    assert l3.write_shard(path, arrays)["written"]


def test_pack_killed_at_any_point_resumes_to_the_same_bytes(tmp_path, class_tree):
    import random
    import subprocess
    import sys
    import time

    def pack_cmd(out):
        code = f"import l3; l3.pack({str(class_tree)!r}, {str(out)!r}, levels=2, records_per_shard=1)"
        return [sys.executable, "-c", code]

    clean = tmp_path / "clean"
    subprocess.run(pack_cmd(clean), check=True, timeout=300)
    def dataset_files(folder):
        return {
            p.name: p.read_bytes()
            for p in folder.iterdir()
            if p.suffix == ".l3s" or p.name == "manifest.json"
        }

    want = dataset_files(clean)
    assert len(want) > 2 and "manifest.json" in want
    rng = random.Random(7)
    for attempt in range(5):
        out = tmp_path / f"killed{attempt}"
        # Killed once or twice, at random points, then run to the end.
        for _ in range(1 + attempt % 2):
            proc = subprocess.Popen(pack_cmd(out))
            time.sleep(rng.uniform(0.05, 1.5))
            proc.kill()
            proc.wait(timeout=60)
        subprocess.run(pack_cmd(out), check=True, timeout=300)
        got = dataset_files(out)
        assert got.keys() == want.keys(), attempt
        for name, data in want.items():
            assert got[name] == data, f"attempt {attempt}: {name} differs"
