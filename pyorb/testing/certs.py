"""A throwaway public-key infrastructure for TLS tests, made at test time.

No private key is ever committed: :func:`make_pki` writes a CA, server and
client certificates signed by it, an expired server certificate and a
second, untrusted CA with its own server and client certificates, all as
PEM files in a directory the caller owns (pytest's ``tmp_path``).  It needs
the ``cryptography`` package (a pyorb development dependency).
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from pyorb import tls

DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Identity:
    """A certificate and its key (PEM files), and both in one file (omniORB's key file)."""

    cert: Path
    key: Path
    bundle: Path


@dataclass(frozen=True)
class TestPKI:
    """The files :func:`make_pki` wrote, and contexts made from them."""

    __test__ = False  # not a pytest test class, whatever its name

    ca: Path
    server: Identity
    client: Identity
    expired_server: Identity
    """Signed by :attr:`ca`, but valid only until yesterday."""
    rogue_ca: Path
    rogue_server: Identity
    """Signed by :attr:`rogue_ca`, which nobody trusts."""
    rogue_client: Identity

    def server_context(self, *, require_client_cert: bool = False, identity: Identity | None = None,
                       verify_clients: bool = True) -> ssl.SSLContext:
        chosen = identity or self.server
        return tls.server_context(chosen.cert, chosen.key, ca=self.ca if verify_clients else None,
                                  require_client_cert=require_client_cert)

    def client_context(self, *, identity: Identity | None = None, check_hostname: bool = True) -> ssl.SSLContext:
        return tls.client_context(self.ca, cert=None if identity is None else identity.cert,
                                  key=None if identity is None else identity.key, check_hostname=check_hostname)


def make_pki(directory: str | Path, hosts: Sequence[str] = DEFAULT_HOSTS,
             client_name: str = "pyorb-test-client") -> TestPKI:
    """Write a test PKI into ``directory``: server certificates name ``hosts``
    (DNS names and IP addresses), the client certificate's common name is
    ``client_name``.  RSA 2048 keys, which every TLS stack reads."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, ca_cert = _authority("pyorb test CA", now)
    rogue_key, rogue_cert = _authority("pyorb rogue CA", now)
    server_names = _names(hosts)
    return TestPKI(
        ca=_write_cert(out / "ca.pem", ca_cert),
        server=_issue(out, "server", hosts[0], server_names, ca_key, ca_cert, now, now + _DAYS_365, server=True),
        client=_issue(out, "client", client_name, None, ca_key, ca_cert, now, now + _DAYS_365, server=False),
        expired_server=_issue(out, "expired-server", hosts[0], server_names, ca_key, ca_cert,
                              now - 2 * _DAYS_365, now - datetime.timedelta(days=1), server=True),
        rogue_ca=_write_cert(out / "rogue-ca.pem", rogue_cert),
        rogue_server=_issue(out, "rogue-server", hosts[0], server_names, rogue_key, rogue_cert, now,
                            now + _DAYS_365, server=True),
        rogue_client=_issue(out, "rogue-client", client_name, None, rogue_key, rogue_cert, now,
                            now + _DAYS_365, server=False),
    )


_DAYS_365 = datetime.timedelta(days=365)


def _names(hosts: Sequence[str]) -> list[Any]:
    from cryptography import x509

    names: list[Any] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _name(common_name: str) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pyorb tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _authority(common_name: str, now: datetime.datetime) -> tuple[Any, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    key = _key()
    name = _name(common_name)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _DAYS_365)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def _issue(out: Path, stem: str, common_name: str, names: list[Any] | None, ca_key: Any, ca_cert: Any,
           not_before: datetime.datetime, not_after: datetime.datetime, *, server: bool) -> Identity:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    key = _key()
    builder = (x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(not_before - datetime.timedelta(minutes=5)).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               # A service's certificate also identifies it when it calls others (a middle tier).
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                                                    if server else [ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                              critical=False))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    cert_path = _write_cert(out / f"{stem}.pem", cert)
    key_pem = _key_pem(key)
    key_path = out / f"{stem}-key.pem"
    key_path.write_bytes(key_pem)
    key_path.chmod(0o600)
    bundle = out / f"{stem}-bundle.pem"
    bundle.write_bytes(cert_path.read_bytes() + key_pem)
    bundle.chmod(0o600)
    return Identity(cert_path, key_path, bundle)


def _write_cert(path: Path, cert: Any) -> Path:
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _key_pem(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                   serialization.NoEncryption()))
