# The compiled value walk (_cvalues.pyx): a run of values, or -1 for the Python walk to take it.
from pyorb.marshal.layout.cursors import _Frame
from pyorb.marshal.layout.valuetypes import _Value

def _zero_values(node: _Value, f: _Frame, i: int, n: int) -> int: ...
