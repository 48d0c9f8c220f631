"""Shared fixtures: the bundled samples and a dataset packed from them."""

import os
from pathlib import Path

import pytest

import l3

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


@pytest.fixture(scope="session")
def sample_paths():
    paths = sorted(SAMPLES.glob("*.png"))
    assert len(paths) >= 6, f"bundled samples missing under {SAMPLES}"
    return paths


@pytest.fixture(scope="session")
def class_tree(tmp_path_factory, sample_paths):
    """The samples in two class folders (a, b) plus one unlabelled image at the root."""
    root = tmp_path_factory.mktemp("tree")
    for i, p in enumerate(sample_paths):
        folder = root if i == 0 else root / ("a" if i % 2 else "b")
        folder.mkdir(exist_ok=True)
        (folder / p.name).write_bytes(p.read_bytes())
    return root


@pytest.fixture(scope="session")
def dataset3(tmp_path_factory, class_tree):
    """class_tree packed with 3 levels, 2 records per shard."""
    out = tmp_path_factory.mktemp("ds3")
    l3.pack(class_tree, out, levels=3, records_per_shard=2)
    return out


@pytest.fixture(scope="session")
def gpu_available():
    adapter = l3.gpu_adapter()
    if adapter is None and in_ci():
        pytest.fail("CI=true but no GPU adapter was found (install Mesa lavapipe)")
    return adapter is not None
