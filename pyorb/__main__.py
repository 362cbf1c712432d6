"""``python -m pyorb``: the pyorb command line."""

import sys

from pyorb.cli import main

sys.exit(main())
