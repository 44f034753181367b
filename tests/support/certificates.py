"""A certificate authority of the tests' own: the run's whole trust store (`tests/conftest.py`), and the
signer of the certificates of the HTTPS servers tests start."""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

_DAY = datetime.timedelta(days=1)


def authority(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A new authority's certificate, written to `folder/ca.pem`, and a server's TLS context with a
    certificate it signed for `localhost`."""
    key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    issuer = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "modelport tests' authority")])
    ca = (
        x509.CertificateBuilder().subject_name(issuer).issuer_name(issuer).public_key(key.public_key())
        .serial_number(1).not_valid_before(now - _DAY).not_valid_after(now + _DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    leaf = (
        x509.CertificateBuilder().issuer_name(issuer).public_key(server_key.public_key())
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .serial_number(2).not_valid_before(now - _DAY).not_valid_after(now + _DAY)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / "server.pem").write_bytes(
        leaf.public_bytes(serialization.Encoding.PEM)
        + server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(folder / "server.pem")
    return folder / "ca.pem", served
