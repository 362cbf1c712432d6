"""The one error type of the GIOP core."""

from __future__ import annotations


class ProtocolError(Exception):
    """The peer broke the GIOP protocol (or a configured limit).

    ``send_message_error`` says whether GIOP wants a MessageError sent before
    the connection is closed; the connection is always unusable afterwards.
    """

    def __init__(self, reason: str, *, send_message_error: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.send_message_error = send_message_error
