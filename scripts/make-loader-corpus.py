#!/usr/bin/env python3
"""Builds the loader benchmark's corpus: 500x375 RGB PNG tiles cut from the shared photos and
artwork (../shared/data/images/{photo_lossless,photo_png_jpeg_origin,artwork_lossless}) at
scales 1, 3/4 and 1/2 (Lanczos), in an ImageFolder tree with one class per source folder.

    python scripts/make-loader-corpus.py OUT [--images ../shared/data/images]

Deterministic (same inputs, same tiles, same names); needs Pillow. Writes each tile to a
temporary name and renames it, so an interrupted run leaves no partial PNG; an existing OUT
is refused unless --force.
"""

import argparse
import os
import shutil
import sys
from pathlib import Path

from PIL import Image

TILE = (500, 375)
SCALES = (1.0, 0.75, 0.5)
CLASSES = ("photo_lossless", "photo_png_jpeg_origin", "artwork_lossless")


def main() -> int:
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--images", type=Path, default=here.parent.parent / "shared/data/images")
    ap.add_argument("--force", action="store_true", help="replace an existing OUT")
    args = ap.parse_args()
    if args.out.exists():
        if not args.force:
            print(f"{args.out} exists (pass --force to replace it)", file=sys.stderr)
            return 1
        shutil.rmtree(args.out)
    count = 0
    for cls in CLASSES:
        src = args.images / cls
        if not src.is_dir():
            print(f"missing {src}", file=sys.stderr)
            return 1
        (args.out / cls).mkdir(parents=True)
        for path in sorted(src.iterdir()):
            with Image.open(path) as im:
                im = im.convert("RGB")
                for scale in SCALES:
                    w, h = round(im.width * scale), round(im.height * scale)
                    scaled = im if scale == 1.0 else im.resize((w, h), Image.LANCZOS)
                    for ty in range(h // TILE[1]):
                        for tx in range(w // TILE[0]):
                            box = (tx * TILE[0], ty * TILE[1], (tx + 1) * TILE[0], (ty + 1) * TILE[1])
                            name = f"{path.stem}-s{int(scale * 100)}-{ty}-{tx}.png"
                            tmp = args.out / cls / f".{name}.tmp"
                            scaled.crop(box).save(tmp, format="PNG")
                            os.replace(tmp, args.out / cls / name)
                            count += 1
    print(f"{count} tiles of {TILE[0]}x{TILE[1]} in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
