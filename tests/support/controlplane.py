"""A real Kubernetes control plane (etcd, apiserver, controller-manager, scheduler) on 127.0.0.1.

The binaries come from tests/k8s/build.sh, one directory per Kubernetes release
(<bin>/v1.37, <bin>/v1.34: see releases()), with helm once in <bin>. There is no kubelet:
pods are scheduled and bound (including DRA allocation) but never run. Authentication uses a
static token file: an admin in system:masters, plus the users that the default RBAC roles bind
for the controller-manager and the scheduler. The apiserver serves with a certificate that
app.webhook.certs.make_certs makes, as `gpu2dra certs` does for the webhook.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import json
import os
import secrets
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from kubernetes import client, config

from app.webhook.certs import make_certs
from tests.support.ports import free_port, free_ports

Obj = dict[str, Any]
REPO_ROOT = Path(__file__).resolve().parents[2]
K8S_DIR = REPO_ROOT / "tests" / "k8s"
CONTROL_PLANE_BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
# What tests/k8s/build.sh puts in each release's directory; kubectl is for tests that shell out.
RELEASE_BINARIES = (*CONTROL_PLANE_BINARIES, "kubectl")
BUILD_HINT = "tests/k8s/build.sh"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
# The node-lifecycle controller would taint fake Nodes (no kubelet heartbeats) as unreachable.
DISABLED_CONTROLLERS = ("node-lifecycle-controller",)
# The one real node (tests/node): its kubelet is system:node:<name> in system:nodes.
REAL_NODE_NAME = "e2e-node"
# The user of the admin kubeconfig (in system:masters): the name the API server gives to its
# calls, and so to those of a gpu2dra run with it (tests/support/webhook.py).
ADMIN_USER = "admin"


def releases(k8s_dir: Path = K8S_DIR) -> list[str]:
    """The Kubernetes releases tests/k8s builds, newest first: each folder v<major>.<minor>
    with a go.mod (update-gomod.sh writes them)."""
    found = [d.parent.name for d in k8s_dir.glob("v*/go.mod")]
    return sorted(found, key=lambda r: tuple(int(n) for n in r[1:].split(".")), reverse=True)


def kubernetes_version(release: str, k8s_dir: Path = K8S_DIR) -> str:
    """The k8s.io/kubernetes version that release's go.mod builds, e.g. "v1.37.2"."""
    for line in (k8s_dir / release / "go.mod").read_text().splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "k8s.io/kubernetes":
            return words[1]
    raise ValueError(f"no k8s.io/kubernetes in {k8s_dir / release / 'go.mod'}")


def find_bin_dir() -> Path:
    """The directory build.sh fills: $GPU2DRA_BIN, else <repo>/.bin. It holds helm and one
    directory of binaries per release."""
    env = os.environ.get("GPU2DRA_BIN")
    return Path(env) if env else REPO_ROOT / ".bin"


def release_bin_dir(release: str | None = None) -> Path:
    """The binaries of one release (the newest by default): <bin>/<release>."""
    return find_bin_dir() / (release or releases()[0])


def missing_binaries(
    bin_dir: Path | None = None, names: Sequence[str] = CONTROL_PLANE_BINARIES
) -> list[str]:
    """Names of the binaries that are absent (or not executable) in bin_dir (by default the
    newest release's)."""
    directory = bin_dir or release_bin_dir()
    return [n for n in names if not os.access(directory / n, os.X_OK)]


def binaries_present(
    bin_dir: Path | None = None, names: Sequence[str] = CONTROL_PLANE_BINARIES
) -> bool:
    return not missing_binaries(bin_dir, names)


class ControlPlaneError(RuntimeError):
    pass


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: if pytest dies hard, take the child with it.
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


def _write_certificates(pki: Path) -> None:
    """ca.crt, apiserver.{crt,key} (serving 127.0.0.1 and the kubernetes Service) and the
    service-account key pair."""
    # A CA and a serving certificate of the shape `gpu2dra certs` makes for the webhook.
    serving = make_certs(
        [
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
        ["127.0.0.1", str(next(ipaddress.IPv4Network(SERVICE_CLUSTER_IP_RANGE).hosts()))],
        days=1,
    )
    # A signing key, not a certificate: make_certs has no use for one.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files = {
        "ca.crt": serving.ca_cert,
        "apiserver.crt": serving.cert,
        "apiserver.key": serving.key,
        "sa.key": sa_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        "sa.pub": sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    }
    for name, data in files.items():
        (pki / name).write_bytes(data)
        (pki / name).chmod(0o600)


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler in work_dir.

    bin_dir holds one release's binaries (release_bin_dir()); helm, the same for every
    release, is by default the one beside that directory. Use as a context manager, or call
    start() and stop(). Logs go to work_dir/logs.
    """

    def __init__(
        self,
        bin_dir: Path,
        work_dir: Path,
        *,
        helm: Path | None = None,
        start_timeout: float = 120.0,
        client_qps: tuple[float, int] | None = None,
        apiserver_args: Sequence[str] = (),
    ) -> None:
        self.bin_dir = bin_dir
        self._apiserver_args = list(apiserver_args)
        self.helm = helm or bin_dir.parent / "helm"
        self.work_dir = work_dir
        self.start_timeout = start_timeout
        # (QPS, burst) of the controller-manager's and the scheduler's API clients; None keeps
        # their defaults (20/30 and 50/100), which throttle a 1,000-pod burst.
        self._client_qps = (
            [f"--kube-api-qps={client_qps[0]:g}", f"--kube-api-burst={client_qps[1]}"]
            if client_qps
            else []
        )
        self._pki = work_dir / "pki"
        self._log_dir = work_dir / "logs"
        self._kubeconfig = work_dir / "admin.kubeconfig"
        self._admin_token = secrets.token_hex(16)
        self._apiserver_port = 0
        self._etcd_url = ""
        self._component_tokens = {
            "kube-controller-manager": secrets.token_hex(16),
            "kube-scheduler": secrets.token_hex(16),
        }
        self._node_token = secrets.token_hex(16)
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (user in system:masters)."""
        return self._kubeconfig

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self._apiserver_port}"

    @property
    def log_dir(self) -> Path:
        """One <component>.log per process."""
        return self._log_dir

    @property
    def ca_file(self) -> Path:
        """The CA that signed the apiserver's serving certificate."""
        return self._pki / "ca.crt"

    def api_client(self) -> client.ApiClient:
        """A kubernetes.client.ApiClient for the admin kubeconfig (close it when done)."""
        api = config.new_client_from_config(config_file=str(self._kubeconfig))
        assert isinstance(api, client.ApiClient)
        return api

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- start ---------------------------------------------------------------------------

    def start(self) -> None:
        missing = missing_binaries(self.bin_dir)
        if missing:
            raise ControlPlaneError(
                f"missing {', '.join(missing)} in {self.bin_dir}: run {BUILD_HINT}"
            )
        for directory in (self._pki, self._log_dir):
            directory.mkdir(parents=True, exist_ok=True)
        _write_certificates(self._pki)
        try:
            self._start_etcd()
            self._start_apiserver()
            self._start_controller_manager()
            self._start_scheduler()
        except BaseException:
            self.stop()
            raise

    def _start_etcd(self) -> None:
        client_port, peer_port = free_ports(2)
        client_url, peer_url = (f"http://127.0.0.1:{p}" for p in (client_port, peer_port))
        self._etcd_url = client_url
        self._spawn(
            "etcd",
            [
                f"--data-dir={self.work_dir / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync=true",
            ],
        )
        self._wait_http("etcd", f"{client_url}/health", lambda body: b'"true"' in body)

    def _start_apiserver(self) -> None:
        self._apiserver_port = self._apiserver_port or free_port()  # the same after a restart
        tokens = self.work_dir / "tokens.csv"
        lines = [f'{self._admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"']
        lines += [
            f"{token},system:{name},system:{name}" for name, token in self._component_tokens.items()
        ]
        node_user = f"system:node:{REAL_NODE_NAME}"
        lines.append(f'{self._node_token},{node_user},{node_user},"system:nodes"')
        tokens.write_text("\n".join(lines) + "\n")
        tokens.chmod(0o600)
        self._write_kubeconfig(self._kubeconfig, ADMIN_USER, self._admin_token)

        pki = self._pki
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={self._etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self._apiserver_port}",
                f"--cert-dir={pki}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=Node,RBAC",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--allow-privileged=true",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                # The "kubernetes" Service would get 127.0.0.1 as its endpoint, which
                # Endpoints validation rejects (loopback), so skip the reconciler.
                "--endpoint-reconciler-type=none",
                # Without kube-proxy, a webhook registered by Service is reached through the
                # Service's EndpointSlices (the aggregator's resolver), not its ClusterIP.
                "--enable-aggregator-routing=true",
                # kubectl exec/logs reach the real node's kubelet by its IP (no DNS here).
                "--kubelet-preferred-address-types=InternalIP",
                *self._apiserver_args,
            ],
        )
        self._wait_http(
            "kube-apiserver",
            f"{self.server}/readyz",
            lambda body: body.strip() == b"ok",
            context=ssl.create_default_context(cafile=str(self.ca_file)),
            token=self._admin_token,
        )

    def _start_controller_manager(self) -> None:
        kubeconfig = self.work_dir / "kube-controller-manager.kubeconfig"
        name = "kube-controller-manager"
        self._write_kubeconfig(kubeconfig, name, self._component_tokens[name])
        port = free_port()
        controllers = ",".join(["*", *(f"-{c}" for c in DISABLED_CONTROLLERS)])
        self._spawn(
            name,
            [
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.work_dir / name}",
                "--leader-elect=false",
                f"--controllers={controllers}",
                f"--service-account-private-key-file={self._pki / 'sa.key'}",
                f"--root-ca-file={self.ca_file}",
                "--use-service-account-credentials=true",
                *self._client_qps,
            ],
        )
        self._wait_http(name, f"https://127.0.0.1:{port}/healthz", lambda b: b.strip() == b"ok")
        # healthz is ok before the controllers run. Pods need their namespace's default
        # ServiceAccount (ServiceAccount admission), so wait until the controllers made one.
        self._wait_http(
            name,
            f"{self.server}/api/v1/namespaces/default/serviceaccounts/default",
            lambda body: b'"ServiceAccount"' in body,
            context=ssl.create_default_context(cafile=str(self.ca_file)),
            token=self._admin_token,
        )

    def _start_scheduler(self) -> None:
        kubeconfig = self.work_dir / "kube-scheduler.kubeconfig"
        name = "kube-scheduler"
        self._write_kubeconfig(kubeconfig, name, self._component_tokens[name])
        port = free_port()
        self._spawn(
            name,
            [
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.work_dir / name}",
                "--leader-elect=false",
                # Each scheduling attempt's result and its reason (a failed run keeps the log).
                "--v=2",
                # A pod refused on a passing state is tried again within 20 s, not 5 min. The
                # 1.37 scheduler counts a shared device's consumed capacity twice while a claim
                # is both in flight and in its claim cache (GatherAllocatedState sums the two),
                # so the last share of a device can look taken; no event re-queues the pod
                # (another claim's update is skipped unless it frees devices). The operator's
                # workaround, docs/concepts/sharing.md#a-pod-refused-the-last-share.
                "--pod-max-in-unschedulable-pods-duration=20s",
                *self._client_qps,
            ],
        )
        self._wait_http(name, f"https://127.0.0.1:{port}/readyz", lambda b: b.strip() == b"ok")

    def write_node_kubeconfig(self, path: Path) -> None:
        """A kubeconfig for the kubelet of REAL_NODE_NAME (Node authorizer, NodeRestriction)."""
        self._write_kubeconfig(path, f"system:node:{REAL_NODE_NAME}", self._node_token)

    def webhook_calls(self, webhook: str) -> float:
        """How many times this API server has called admission webhook `webhook`, by its own
        histogram of admission times."""
        metric = "apiserver_admission_webhook_admission_duration_seconds_count"
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in self.kubectl("get", "--raw", "/metrics").splitlines()
            if line.startswith(metric) and f'name="{webhook}"' in line
        )

    def write_service_account_kubeconfig(
        self, path: Path, name: str, namespace: str, hours: int = 12
    ) -> None:
        """A kubeconfig acting as ServiceAccount `namespace/name` (a TokenRequest token), as a
        pod running under it would: its RBAC, and its username in admission requests."""
        token = self.kubectl(
            "create", "token", name, "--namespace", namespace, "--duration", f"{hours}h"
        ).strip()
        self._write_kubeconfig(path, f"system:serviceaccount:{namespace}:{name}", token)

    def _write_kubeconfig(self, path: Path, user: str, token: str) -> None:
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "e2e",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority": str(self.ca_file),
                    },
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
            "current-context": "e2e",
        }
        path.write_text(yaml.safe_dump(kubeconfig, sort_keys=False))
        path.chmod(0o600)

    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self._log_dir / f"{name}.log").open("ab")
        try:
            process = subprocess.Popen(
                [str(self.bin_dir / name), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        finally:
            log.close()
        self._processes.append((name, process))

    def _wait_http(
        self,
        name: str,
        url: str,
        is_ready: Callable[[bytes], bool],
        *,
        context: ssl.SSLContext | None = None,
        token: str | None = None,
    ) -> None:
        """Poll url until is_ready(body) is true, failing early if the process exited."""
        if context is None and url.startswith("https:"):
            # KCM and scheduler serve with a self-signed certificate; this is a local probe.
            context = ssl._create_unverified_context()
        request = urllib.request.Request(url)
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        process = dict(self._processes)[name]
        deadline = time.monotonic() + self.start_timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with {process.returncode} during startup:\n"
                    + self._log_tail(name)
                )
            try:
                with urllib.request.urlopen(request, timeout=5, context=context) as response:
                    body: bytes = response.read()
                    if is_ready(body):
                        return
                    last = body.decode(errors="replace")
            except urllib.error.HTTPError as error:
                last = f"HTTP {error.code}: {error.read().decode(errors='replace')[-2000:]}"
            except (OSError, ssl.SSLError) as error:
                last = str(error)
            time.sleep(0.25)
        raise ControlPlaneError(
            f"{name} not ready at {url} after {self.start_timeout:.0f}s: {last}\n"
            + self._log_tail(name)
        )

    def _log_tail(self, name: str, lines: int = 30) -> str:
        path = self._log_dir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return f"--- last lines of {path} ---\n" + "\n".join(text.splitlines()[-lines:])

    # -- kubectl, as a user would --------------------------------------------------------

    def run_kubectl(
        self, *args: str, stdin: str | Obj | None = None
    ) -> subprocess.CompletedProcess[str]:
        """kubectl with the admin kubeconfig; a dict on stdin is sent as JSON."""
        return subprocess.run(
            [str(self.bin_dir / "kubectl"), "--kubeconfig", str(self._kubeconfig), *args],
            input=stdin if stdin is None or isinstance(stdin, str) else json.dumps(stdin),
            capture_output=True,
            text=True,
            check=False,
        )

    def kubectl(self, *args: str, stdin: str | Obj | None = None) -> str:
        """kubectl that must succeed; its stdout."""
        done = self.run_kubectl(*args, stdin=stdin)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def run_helm(self, *args: str) -> str:
        """helm with the admin kubeconfig, which must succeed; its stdout."""
        done = subprocess.run(
            [str(self.helm), "--kubeconfig", str(self._kubeconfig), *args],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def create(self, namespace: str, obj: Obj, *extra: str) -> tuple[Obj, str]:
        """`kubectl create`: the object as stored (or shown, with --dry-run) and the warnings
        printed."""
        done = self.run_kubectl(
            "create", "-n", namespace, "-o", "json", "-f", "-", *extra, stdin=obj
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout), done.stderr

    # -- faults --------------------------------------------------------------------------

    def process(self, name: str) -> subprocess.Popen[bytes]:
        """The running process of one component, to pause (SIGSTOP) or resume (SIGCONT)."""
        return dict(self._processes)[name]

    def restart_apiserver(self) -> None:
        """Kill kube-apiserver (every watch breaks) and start it again on the same port.
        SIGKILL, as in a crash: a graceful stop waits out its long-running requests."""
        self.kill_apiserver()
        self.start_apiserver()

    def kill_apiserver(self) -> None:
        """SIGKILL kube-apiserver: its port refuses connections until start_apiserver()."""
        process = self.process("kube-apiserver")
        process.kill()
        process.wait()
        self._processes.remove(("kube-apiserver", process))

    def start_apiserver(self) -> None:
        """Start kube-apiserver again on the same port, after kill_apiserver()."""
        self._start_apiserver()

    # -- stop ----------------------------------------------------------------------------

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the processes newest first: SIGTERM, then SIGKILL after timeout.

        One at a time: an apiserver whose etcd is already gone takes ~10 s to shut down.
        """
        processes = list(reversed(self._processes))
        self._processes = []
        for _, process in processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.terminate()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
