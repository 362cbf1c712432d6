#!/usr/bin/env python3
"""The omniORBpy baseline sink (thread per connection or pool): see pyorb/servers/omni.py."""
import sys

from pyorb.servers.omni import main

if __name__ == "__main__":
    main(["sink", *sys.argv[1:]])
