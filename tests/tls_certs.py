"""A throwaway certificate authority for TLS tests: a CA and the certificates it issues, as PEM files.

Used by tests/transport/test_tls.py, tests/ha/test_ha_tls.py and the peer TLS tests; made with the
`cryptography` package (a dependency: the broker makes its tls.test.mode.enable certificate with it).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Pki", "make_pki"]

LOCAL_HOSTS = ("127.0.0.1", "localhost")


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


@dataclass
class Pki:
    directory: Path
    ca_cert: Path
    ca_key_obj: ec.EllipticCurvePrivateKey
    ca_obj: x509.Certificate

    def issue(
        self,
        name: str,
        hosts: tuple[str, ...] = LOCAL_HOSTS,
        *,
        days: int = 30,
        expired: bool = False,
        client: bool = False,
        key_password: str | None = None,
        cert_path: Path | None = None,
        key_path: Path | None = None,
    ) -> tuple[Path, Path]:
        """A certificate for `hosts` signed by this CA, written as <name>.crt / <name>.key (or the paths given)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start, end = (
            (now - datetime.timedelta(days=10), now - datetime.timedelta(days=1))
            if expired
            else (
                now - datetime.timedelta(minutes=5),
                now + datetime.timedelta(days=days),
            )
        )
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(self.ca_obj.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.ca_key_obj, hashes.SHA256())
        cert_path = cert_path or self.directory / f"{name}.crt"
        key_path = key_path or self.directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(_key_pem(key, key_password))
        return cert_path, key_path


def make_pki(directory: Path, name: str = "test-ca") -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=30))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    ca_path = directory / f"{name}.crt"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return Pki(directory, ca_path, key, ca)
