# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The padding walk in C: the compiled twin of ``pyorb.marshal.layout._zero_flat``.

omniORB's raw marshaler leaves alignment padding uninitialised, so every
body pyorb sends is walked and its padding zeroed.  For the common shape,
fixed-size runs and counted octets (strings) one after another, the
layout module has a flat plan and a one-loop walk; this is that walk over
the buffer's bytes.  Anything wrong with the data (truncated, a count over
its bound, a string without its NUL) is left to the Python original, which
raises the error; padding zeroed on the way is zeroed again, harmlessly.
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport uint8_t

# The layout package declares its twin at its very end, or (through the value walk, which
# takes ``_walk``) this module is imported half-way: its Python original is looked up when needed.
from pyorb import _accelerator


cdef Py_ssize_t _walk(tuple plan, uint8_t* d, Py_ssize_t i, Py_ssize_t end, Py_ssize_t sh, bint le) except -2:
    """Where the values that start at ``i`` end, or -1 if the data is not what the plan says."""
    cdef Py_ssize_t j, size, a, b, c, k, count, unit, limit
    cdef bint counted, nul
    cdef tuple part, layout, ops, op
    for part in plan:
        counted = part[0]
        layout = <tuple>(<tuple>part[1])[(i + sh) & 7]
        size = layout[0]
        ops = <tuple>layout[1]
        j = i + size
        if j > end:
            return -1
        for op in ops:
            a = op[0]
            b = op[1]
            c = op[2]
            if a < 0 or b > size or c <= 0:
                return -1
            k = i + a
            while k < i + b:
                d[k] = 0
                k += c
        if not counted:
            i = j
            continue
        if size < 4:
            return -1
        count = _u32(d + j - 4, le)
        unit = part[2]
        nul = part[3]
        limit = part[4]
        if unit <= 0 or count > (end - j) // unit:
            return -1
        i = j + count * unit
        if count > limit or (nul and (count == 0 or d[i - 1] != 0)):
            return -1
    return i


def _zero_flat(tuple plan, d, Py_ssize_t end, Py_ssize_t sh, bint le):
    """The compiled twin of ``layout._zero_flat``."""
    cdef Py_buffer view
    cdef Py_ssize_t i
    PyObject_GetBuffer(d, &view, PyBUF_WRITABLE)
    try:
        if end < 0 or end > view.len:
            i = -1
        else:
            i = _walk(plan, <uint8_t*>view.buf, 0, end, sh, le)
    finally:
        PyBuffer_Release(&view)
    if i < 0:
        # The Python original raises the error (or, for odd input, decides).
        return _accelerator.original("pyorb.marshal.layout._zero_flat")(plan, d, end, sh, le)
    return i
