#!/usr/bin/env python3
"""The papers' sink server on pyorb: see pyorb/servers/sink.py (`--help` lists the models)."""
import sys

from pyorb.servers.sink import main

if __name__ == "__main__":
    sys.exit(main())
