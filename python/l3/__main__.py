"""``python -m l3 COMMAND``: the package's commands (the image and dataset commands are in
the ``l3`` binary).

    python -m l3 pack-arrays run.h5 -o ds/ --input u,v --target p --mode input=rel:1e-3
    python -m l3 source-info run.nc

Errors print one line on stderr and exit with status 1 (2 for a usage error).
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ._commands import add_parsers
from ._errors import L3Error


def main(argv: Optional[List[str]] = None) -> int:
    """Runs one command; returns its exit status."""
    parser = argparse.ArgumentParser(prog="python -m l3", description=__doc__.split("\n\n")[0])
    add_parsers(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except L3Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
