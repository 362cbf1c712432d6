"""The ``pyorb`` command line (``pyorb --help``); see docs/cli.md.

Only :func:`main` lives here, so that the console script starts by
importing this small module and the commands load what they need.
"""

from __future__ import annotations

import sys
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pyorb`` console script and ``python -m pyorb``."""
    from pyorb.cli.app import run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
