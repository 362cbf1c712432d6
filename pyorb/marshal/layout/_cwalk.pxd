# What the value walk (_cvalues.pyx) takes from the flat walk: reading a ulong, walking a flat plan.
from libc.stdint cimport uint8_t, uint32_t


cdef inline uint32_t _u32(const uint8_t* p, bint little) noexcept nogil:
    if little:
        return p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef Py_ssize_t _walk(tuple plan, uint8_t* d, Py_ssize_t i, Py_ssize_t end, Py_ssize_t sh, bint le) except -2
