"""IDL: compiling it with omniidl, reading its declarations, writing typed stubs.

* :mod:`pyorb.idl.compiler`: omniidl's Python back end run through this
  interpreter; :func:`load_idl` and :func:`compile_idl` (the public ones).
* :mod:`pyorb.idl.model`: the declarations of an IDL file (for stubs and the CLI).
* :mod:`pyorb.idl.stubs`: ``pyorb compile``'s typed stubs and companions.

The run-time helpers that generated stubs import are in :mod:`pyorb.typed`.
"""

from __future__ import annotations

from pyorb.idl.compiler import (
    IDLError,
    BENCH_IDL,
    bench_idl,
    compile_idl,
    import_generated,
    load_idl,
    omniidl_command,
    run_omniidl,
)

__all__ = ["BENCH_IDL", "IDLError", "bench_idl", "compile_idl", "import_generated", "load_idl", "omniidl_command", "run_omniidl"]
