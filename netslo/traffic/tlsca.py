"""Run-scoped TLS: a throw-away certificate authority and one server certificate, TLS 1.3 only.

``make(directory)`` writes ``ca.pem``, ``server.pem`` and ``server.key`` (ECDSA P-256, valid one day)
with the ``cryptography`` package. Agents find the directory through ``--tls-dir`` or the
``NETSLO_TLS_DIR`` environment variable (the embedded provider passes its environment to every
pod; a Kubernetes provider mounts the directory as a Secret and sets the variable).

Clients verify the chain against ``ca.pem`` and the name ``SERVER_NAME`` (sent as SNI), so the same
certificate serves every exposure path (pod IP, Service IP, node port, proxy) without IP SANs.
"""

from __future__ import annotations

import datetime
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from netslo.core.errors import SpecError

ENV = "NETSLO_TLS_DIR"
SERVER_NAME = "responder.netslo.test"
FILES = ("ca.pem", "server.pem", "server.key")


@dataclass(frozen=True)
class TlsFiles:
    directory: Path
    ca: Path
    cert: Path
    key: Path


def files(directory) -> TlsFiles:
    d = Path(directory)
    return TlsFiles(d, d / "ca.pem", d / "server.pem", d / "server.key")


def make(directory, server_name: str = SERVER_NAME, days: int = 1) -> TlsFiles:
    """Create a CA and a server certificate for ``server_name`` in ``directory`` (created if needed)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    out = files(directory)
    out.directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "netslo run CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(ca_ski, critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, server_name)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(until)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(server_name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
            .sign(ca_key, hashes.SHA256()))
    out.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(out.key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return out


def locate(directory=None) -> TlsFiles:
    """The TLS directory given, else ``$NETSLO_TLS_DIR``; SpecError when missing or incomplete."""
    d = directory or os.environ.get(ENV)
    if not d:
        raise SpecError("--tls-dir", None, f"a directory with {', '.join(FILES)} (or set {ENV})")
    out = files(d)
    for p in (out.ca, out.cert, out.key):
        if not p.is_file():
            raise SpecError("--tls-dir", str(d), f"a directory with {', '.join(FILES)} (missing {p.name})")
    return out


def server_context(directory=None) -> ssl.SSLContext:
    """Server side: TLS 1.3 only, the run's server certificate."""
    f = locate(directory)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(f.cert, f.key)
    return ctx


def client_context(directory=None) -> ssl.SSLContext:
    """Client side: TLS 1.3 only, chain verified against the run's CA, host name checked."""
    f = locate(directory)
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(f.ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    return ctx
