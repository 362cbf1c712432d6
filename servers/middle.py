#!/usr/bin/env python3
"""The papers' middle server on pyorb: see pyorb/servers/middle.py (`--help` lists the models)."""
import sys

from pyorb.servers.middle import main

if __name__ == "__main__":
    sys.exit(main())
