"""Performance tools and floors, run from the repository root: ``python -m benchmarks.<name> --help``.

Not shipped with pyorb.  Each tool starts its servers and clients as
modules (``sys.executable -m ...``) with the repository root as their
working directory.
"""
