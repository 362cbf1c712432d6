# The compiled twin of pyorb.aio.direct._send_now (_csend.pyx): the same signature.
import socket

def _send_now(sock: socket.socket, data: bytes | bytearray | memoryview) -> int: ...
