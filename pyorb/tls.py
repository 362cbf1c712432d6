"""TLS settings for IIOP over TLS (SSLIOP): standard :class:`ssl.SSLContext` objects.

A server or client takes any ``ssl.SSLContext``; these helpers make the usual
ones from PEM files, with TLS 1.2 as the lowest version.  omniORB's
``-ORBsslCAFile``/``sslContext::certificate_authority_file`` is ``ca``, its
key file is ``cert`` plus ``key`` (pyorb reads them as two files or one that
holds both), and ``verify_mode`` ``SSL_VERIFY_PEER |
SSL_VERIFY_FAIL_IF_NO_PEER_CERT`` is ``require_client_cert=True``.
"""

from __future__ import annotations

import os
import ssl
from typing import Any, Union

PathLike = Union[str, "os.PathLike[str]"]

MINIMUM_VERSION = ssl.TLSVersion.TLSv1_2


def server_context(
    cert: PathLike,
    key: PathLike | None = None,
    *,
    ca: PathLike | None = None,
    require_client_cert: bool = False,
    password: str | None = None,
) -> ssl.SSLContext:
    """A server context presenting ``cert`` (PEM, with its chain) and ``key``.

    With ``ca``, client certificates are requested and verified against it;
    ``require_client_cert`` refuses clients without one (mutual TLS).
    Raises ``ssl.SSLError``/``OSError`` for unreadable or mismatched files.
    """
    if require_client_cert and ca is None:
        raise ValueError("require_client_cert needs ca: the authority that signs client certificates")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = MINIMUM_VERSION
    context.load_cert_chain(cert, key, password)
    if ca is not None:
        context.load_verify_locations(ca)
        context.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
    return context


def client_context(
    ca: PathLike | None = None,
    *,
    cert: PathLike | None = None,
    key: PathLike | None = None,
    check_hostname: bool = True,
    password: str | None = None,
) -> ssl.SSLContext:
    """A client context that verifies servers against ``ca`` (default: the
    system's trusted authorities) and presents ``cert``/``key`` if given.

    ``check_hostname`` (on by default) also requires the certificate to name
    the host the IOR names.  omniORB and JacORB check only the chain; turn it
    off to match them when certificates do not carry the published names.
    """
    context = ssl.create_default_context(cafile=None if ca is None else os.fspath(ca))
    context.minimum_version = MINIMUM_VERSION
    context.check_hostname = check_hostname
    if cert is not None:
        context.load_cert_chain(cert, key, password)
    return context


def client_option(tls: object) -> ssl.SSLContext | bool | None:
    """A client's ``tls=`` argument, checked: an SSLContext, False (never TLS) or None (the system's authorities)."""
    if tls is None or isinstance(tls, (bool, ssl.SSLContext)):
        return tls
    raise TypeError(f"tls must be an ssl.SSLContext, False or None, not {type(tls).__name__}")


def describe_certificate(cert: dict[str, Any] | None) -> str:
    """A short name for a verified peer certificate (its subject's common name), or ''."""
    if not cert:
        return ""
    for rdn in cert.get("subject", ()):
        for name, value in rdn:
            if name == "commonName":
                return str(value)
    return ""


def tls_reason(exc: BaseException) -> str | BaseException:
    """The useful part of a failed client handshake: the verification message
    for a rejected certificate, else the exception itself."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"server certificate not accepted: {exc.verify_message or exc.reason}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed: {exc.reason or exc}"
    return exc
