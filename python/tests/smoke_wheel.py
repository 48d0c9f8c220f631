"""Smoke test of an installed l3 wheel (scripts/wheel-smoke.sh runs it in a fresh virtualenv
with no Rust toolchain on PATH, from outside the repository): imports l3, round-trips an image
and float arrays, packs and opens a small dataset and takes one loader batch. One line per
step; any mismatch exits non-zero. Needs only l3 and NumPy (no pytest, no Pillow, no torch),
and is named outside pytest's test_*.py pattern so the suite does not collect it.

    python smoke_wheel.py
"""

import sys
import tempfile
from pathlib import Path

import numpy as np


def check(ok: bool, what: str) -> None:
    if not ok:
        print(f"FAIL: {what}", flush=True)
        sys.exit(1)


def step(text: str) -> None:
    print(text, flush=True)


def write_ppm(path: Path, rgb: np.ndarray) -> None:
    """A binary PPM (P6) file, which `l3.pack` reads like PNG (no Pillow needed here)."""
    h, w, _ = rgb.shape
    path.write_bytes(b"P6\n%d %d\n255\n" % (w, h) + np.ascontiguousarray(rgb).tobytes())


def main() -> None:
    import l3

    where = Path(l3.__file__).resolve().parent
    step(f"import l3 {l3.__version__} from {where}; GPU adapter: {l3.gpu_adapter()}")

    rng = np.random.default_rng(7)
    # A smooth gradient with noise (what the predictor is for) and a 16-bit grey image.
    y, x = np.mgrid[0:48, 0:64]
    rgb = np.stack([x * 4, y * 5, (x + y) * 2], axis=-1) + rng.integers(0, 8, (48, 64, 3))
    rgb = rgb.clip(0, 255).astype(np.uint8)
    grey16 = rng.integers(0, 65536, (33, 17), dtype=np.uint16)
    for image in (rgb, grey16):
        data = l3.encode(image)
        back = l3.decode(data)
        check(back.dtype == image.dtype and back.shape == image.shape,
              f"decoded {back.dtype}{back.shape}, encoded {image.dtype}{image.shape}")
        check(np.array_equal(back, image), f"{image.dtype}{image.shape} round trip differs")
    step(f"image round trip: uint8 {rgb.shape} -> {len(l3.encode(rgb))} bytes, "
         f"uint16 {grey16.shape}: equal")

    field = (np.sin(x / 9.0) * np.cos(y / 7.0)).astype(np.float32) + rng.normal(
        0, 1e-3, (48, 64)).astype(np.float32)
    lossless = l3.decode_field(l3.encode_field(field, lossless=True))
    check(lossless.dtype == np.float32 and lossless.shape == field.shape,
          f"lossless field decoded as {lossless.dtype}{lossless.shape}")
    check(np.array_equal(lossless.view(np.uint32), field.view(np.uint32)),
          "lossless float round trip is not bit-exact")
    bound = 1e-3
    bounded = l3.decode_field(l3.encode_field(field, max_error=bound, version=3))
    err = float(np.abs(bounded.astype(np.float64) - field).max())
    check(bounded.shape == field.shape and err <= bound,
          f"error-bounded field: max error {err} over the bound {bound}")
    step(f"float round trip: float32 {field.shape} lossless bit-exact, "
         f"max_error={bound}: max error {err:.2e}")

    with tempfile.TemporaryDirectory() as tmp:
        tree, out = Path(tmp, "images"), Path(tmp, "dataset")
        originals = {}
        for i in range(6):
            cls = "a" if i % 2 else "b"
            (tree / cls).mkdir(parents=True, exist_ok=True)
            image = np.roll(rgb, 5 * i, axis=1)[: 40 + i, : 48 - i]
            write_ppm(tree / cls / f"{i}.ppm", image)
            originals[f"{cls}/{i}.ppm"] = (image, 0 if cls == "a" else 1)
        l3.pack(tree, out, levels=2, records_per_shard=4)
        ds = l3.open_dataset(out)
        check(len(ds) == 6 and ds.classes == ["a", "b"] and ds.levels == 2,
              f"dataset: {len(ds)} records, classes {ds.classes}, {ds.levels} levels")
        for i in range(len(ds)):
            key = ds.record(i)["key"]
            image, label = ds[i]
            want, want_label = originals[key]
            check(np.array_equal(image, want) and label == want_label,
                  f"record {i} ({key}) differs from its source")
        shards = sorted(p.name for p in out.glob("*.l3s"))
        step(f"dataset: packed {len(ds)} images in {len(shards)} shards, opened, "
             f"every record equal to its source")

        with l3.Loader(out, 4, size=(32, 24), seed=1, end_epoch=1, device="cpu") as loader:
            batch = next(loader)
        images, labels = batch["images"], batch["labels"]
        check(images.shape == (4, 3, 24, 32) and images.dtype == np.float32,
              f"loader batch images {images.dtype}{images.shape}")
        check(bool(np.isfinite(images).all()), "loader batch has non-finite values")
        check(labels.dtype == np.int64 and set(labels.tolist()) <= {0, 1},
              f"loader batch labels {labels}")
        check(len(set(batch["samples"].tolist())) == 4, f"samples {batch['samples']}")
        step(f"loader: one batch images {images.dtype}{images.shape}, labels {labels.tolist()}, "
             f"samples {batch['samples'].tolist()}")

        arrays = Path(tmp, "tensors")
        samples = [{"u": field * k, "mask": (field > 0).astype(np.uint8)} for k in range(1, 4)]
        l3.pack_arrays(samples, arrays, modes={"u": {"absolute": bound}})
        tds = l3.open_dataset(arrays)
        check(len(tds) == 3, f"tensor dataset has {len(tds)} records")
        for k, want in enumerate(samples):
            got = tds[k]
            check(np.array_equal(got["mask"], want["mask"]), f"tensor record {k}: mask differs")
            check(float(np.abs(got["u"].astype(np.float64) - want["u"]).max()) <= bound,
                  f"tensor record {k}: u beyond its bound")
        step(f"tensor dataset: packed {len(tds)} records (u within {bound}, mask exact), "
             f"opened, equal")
    step("smoke test passed")


if __name__ == "__main__":
    main()
