# cython: language_level=3, boundscheck=False, wraparound=False
"""A dispatcher thread's write in C: the compiled twin of ``pyorb.aio.direct._send_now``.

The Python original calls ``socket.send``, which lets go of the interpreter
lock for the system call, as every socket call in CPython does.  A
non-blocking send never waits, so the lock bought nothing, and taking it
back is dear: with many dispatcher threads busy, the thread queues behind
them all (two more context switches per reply at 64 connections in
``thread_per_connection``, measured in docs/benchmarks.md).  Here the
thread keeps the lock for the one system call, which ``MSG_DONTWAIT``
guarantees does not block, whatever the socket's mode.
"""

from libc.errno cimport EINTR, errno
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE

cdef extern from "<sys/socket.h>" nogil:
    ssize_t send(int fd, const void* buf, size_t n, int flags)
    int MSG_DONTWAIT
    int MSG_NOSIGNAL


def _send_now(sock, data):
    """Bytes of ``data`` the socket took now (0 or more), or -1 if it took none: full, reset or closed."""
    cdef int fd = sock.fileno()
    cdef ssize_t n
    cdef bytes raw = data if type(data) is bytes else bytes(data)
    if fd < 0:
        return -1
    while True:
        n = send(fd, PyBytes_AS_STRING(raw), <size_t>PyBytes_GET_SIZE(raw), MSG_DONTWAIT | MSG_NOSIGNAL)
        if n >= 0:
            return n
        if errno != EINTR:
            return -1
