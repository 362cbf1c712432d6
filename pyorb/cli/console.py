"""The console every ``pyorb`` command prints its tables to.

Its own module, below ``app`` and the commands, so that a command defined
in its own module (``plan``) imports it at the top instead of reaching back
into the application that mounts it.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console

# Tables piped to a file or another program are not cut down to 80 columns.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 160)
