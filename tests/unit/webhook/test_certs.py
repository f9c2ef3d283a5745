"""Certificates made by `gpu2dra certs` parse, chain, and name the Service."""

from __future__ import annotations

import contextlib
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from app.cli import main


def test_certs_for_a_service(tmp_path: Path) -> None:
    assert (
        main(
            [
                "certs",
                "--service",
                "gpu2dra",
                "--namespace",
                "gpu2dra-system",
                "--out",
                str(tmp_path),
                "--ip",
                "127.0.0.1",
            ]
        )
        == 0
    )
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "gpu2dra",
        "gpu2dra.gpu2dra-system",
        "gpu2dra.gpu2dra-system.svc",
    ]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert cert.issuer == ca.subject
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey)
    cert.verify_directly_issued_by(ca)
    assert (tmp_path / "tls.key").stat().st_mode & 0o077 == 0


def test_certificate_verifies_with_tls(tmp_path: Path) -> None:
    main(["certs", "--service", "s", "--namespace", "n", "--out", str(tmp_path)])
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    # A handshake over memory BIOs: the client trusts only the generated CA.
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    cli = client.wrap_bio(c_in, c_out, server_hostname="s.n.svc")
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (cli, srv):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    assert cli.getpeercert()["subjectAltName"][-1] == ("DNS", "s.n.svc")  # type: ignore[index]
