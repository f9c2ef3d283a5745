"""What each port serves, and who may call the admission port: a real `gpu2dra serve`, real
TLS clients presenting a certificate, or not."""

from __future__ import annotations

import datetime
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.serving.process import ROOT, Serve, request, review, serving
from tests.support.ports import free_port

MANIFEST = b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n"


def test_translate_and_metrics_have_a_port_of_their_own(tmp_path: Path) -> None:
    internal = free_port()
    with serving(tmp_path, "--internal-port", str(internal)) as served:
        with served.connect() as sock:  # the admission port
            assert request(sock, "POST", "/mutate", review())[0] == 200
            assert request(sock, "GET", "/readyz")[0] == 200
            assert request(sock, "POST", "/translate", MANIFEST)[0] == 404
            assert request(sock, "GET", "/metrics")[0] == 404
        with served.connect(internal) as sock:
            assert request(sock, "POST", "/translate", MANIFEST)[0] == 200
            status, text = request(sock, "GET", "/metrics")
            assert status == 200 and b'gpu2dra_requests_total{endpoint="mutate"' in text
            assert request(sock, "POST", "/mutate", review())[0] == 404
            assert request(sock, "GET", "/healthz")[0] == 200


def test_one_port_serves_everything_by_default(tmp_path: Path) -> None:
    with serving(tmp_path) as served, served.connect() as sock:
        assert request(sock, "POST", "/translate", MANIFEST)[0] == 200
        assert request(sock, "GET", "/metrics")[0] == 200


class ClientCA:
    """A CA that signs client certificates, as the API server's would be."""

    def __init__(self, name: str = "client-ca") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    def write(self, path: Path) -> Path:
        path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        return path

    def client(self, served: Serve, tmp: Path, name: str, dns: str | None = None) -> ssl.SSLContext:
        """A client context that presents a certificate for `name` (CN) and `dns`."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
        )
        if dns:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(dns)]), False)
        cert = builder.sign(self.key, hashes.SHA256())
        (tmp / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (tmp / f"{name}.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        context = served.context()
        context.load_cert_chain(tmp / f"{name}.crt", tmp / f"{name}.key")
        return context


def refused(served: Serve, context: ssl.SSLContext | None = None) -> bool:
    """Whether the admission port refuses a client with `context` (its handshake fails, or the
    connection is closed before an answer: TLS 1.3 ends the handshake before the server has
    judged the client's certificate)."""
    try:
        with served.connect(context=context) as sock:
            request(sock, "POST", "/mutate", review())
    except (ssl.SSLError, ConnectionError, OSError):
        return True
    return False


def test_with_a_client_ca_only_its_clients_are_served(tmp_path: Path) -> None:
    ca = ClientCA()
    with serving(tmp_path, "--client-ca", str(ca.write(tmp_path / "client-ca.crt"))) as served:
        with served.connect(context=ca.client(served, tmp_path, "kube-apiserver")) as sock:
            assert request(sock, "POST", "/mutate", review())[0] == 200
        assert refused(served)  # no certificate
        assert refused(served, ClientCA("another").client(served, tmp_path, "kube-apiserver"))


def test_with_client_names_only_those_names_are_served(tmp_path: Path) -> None:
    ca = ClientCA()
    internal = free_port()
    flags = [
        "--client-ca",
        str(ca.write(tmp_path / "client-ca.crt")),
        "--client-name",
        "kube-apiserver",
        "--client-name",
        "webhook-client.example",
        "--internal-port",
        str(internal),
    ]
    with serving(tmp_path, *flags) as served:
        for name, dns in [("kube-apiserver", None), ("apiserver-1", "webhook-client.example")]:
            with served.connect(context=ca.client(served, tmp_path, name, dns)) as sock:
                assert request(sock, "POST", "/mutate", review())[0] == 200
        assert refused(served, ca.client(served, tmp_path, "system:anonymous"))
        assert "none of --client-name" in served.log.read_text()
        # the other port asks for no certificate: Prometheus and /translate's users have none
        with served.connect(internal) as sock:
            assert request(sock, "GET", "/metrics")[0] == 200


@pytest.mark.parametrize("flags", [["--client-name", "x"], ["--internal-port", "PORT"]])
def test_inconsistent_flags_are_refused(tmp_path: Path, flags: list[str]) -> None:
    port = str(free_port())
    args = [a.replace("PORT", port) for a in flags]
    done = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--offline", "--port", port, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and done.stderr.startswith("gpu2dra: serve: --")
