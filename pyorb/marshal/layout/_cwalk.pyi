# The compiled twin of pyorb.marshal.layout._zero_flat (_cwalk.pyx): the same signature.
from pyorb.marshal.layout import _FlatPart

def _zero_flat(plan: tuple[_FlatPart, ...], d: bytearray, end: int, sh: int, le: bool) -> int: ...
