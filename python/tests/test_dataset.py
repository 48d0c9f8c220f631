"""Datasets from Python: pack (folder classes, levels, resume), open and read at every level,
shards from arrays, manifests, and corrupt input."""

import json

import numpy as np
import pytest

import l3


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
