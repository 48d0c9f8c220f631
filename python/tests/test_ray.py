"""The distributed conversion recipe (README, "Distributed conversion") on a local Ray
cluster: shards packed as Ray tasks through the Python module, one manifest written last;
the result is byte-identical to `l3.pack`. Fails (does not skip) without ray when CI=true."""

import os

import pytest

import l3

if os.environ.get("CI") == "true":
    import ray
else:
    ray = pytest.importorskip("ray")
    if not hasattr(ray, "init"):  # a folder named ray (Ray's /tmp/ray) on sys.path
        pytest.skip("ray is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def test_shards_packed_as_ray_tasks(local_ray, tmp_path, class_tree):
    out = tmp_path / "ray"
    out.mkdir()
    classes, jobs = l3.plan_pack(class_tree, records_per_shard=2)

    @ray.remote
    def write(name, records):
        return l3.write_shard(str(out / name), records, levels=2)

    infos = ray.get([write.remote(name, records) for name, records in jobs])
    assert all(i["written"] for i in infos)
    l3.write_manifest(out, [i["file"] for i in infos], classes=classes, levels=2)

    local = tmp_path / "local"
    l3.pack(class_tree, local, levels=2, records_per_shard=2)
    for name, _ in jobs:
        assert (out / name).read_bytes() == (local / name).read_bytes(), name
    ds = l3.open_dataset(out)
    assert len(ds) == sum(len(r) for _, r in jobs) and ds.classes == classes
    # A rerun (after a crash) keeps every complete shard.
    again = ray.get([write.remote(name, records) for name, records in jobs])
    assert not any(i["written"] for i in again)
