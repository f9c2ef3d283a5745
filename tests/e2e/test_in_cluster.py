"""gpu2dra as users run it: the image built from the Dockerfile (tests/image/build.sh) imported
into the real node's containerd, the chart installed with helm as a user would (two replicas,
the default TLS mode, `pullPolicy: Never` as nothing is pulled here), its webhook pods running
on the node and serving the API server, which reaches them through the chart's Service.

Every test asserts the translation itself, not a Ready pod: with `failurePolicy: Ignore` a
webhook that is up but not translating admits pods unchanged. On every release, each with a
kubelet of its own.
"""

from __future__ import annotations

import re
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.node.node import BUSYBOX_IMAGE, RealNode
from tests.support.cluster import (
    A100_SXM4_40GB,
    create_nvidia_device_classes,
    gpu_devices,
    label,
    read_pod,
    templates_in,
    wait_for,
)
from tests.support.controlplane import REAL_NODE_NAME, REPO_ROOT, ControlPlane, find_bin_dir
from tests.support.realnode import running_node
from tests.support.tools import missing
from tests.support.webhook import CHART, RELEASE_NAMESPACE, in_tree_values

pytestmark = pytest.mark.every_release

Obj = dict[str, Any]
NAME = "gpu2dra"
VERSION = next(
    line.split('"')[1]
    for line in (REPO_ROOT / "pyproject.toml").read_text().splitlines()
    if line.startswith("version = ")
)
NEXT = f"{VERSION}-next"  # the same image under another tag: what an upgrade rolls out
DEVICES = gpu_devices(REAL_NODE_NAME, A100_SXM4_40GB, gpus=2)
CLAIMS_WEBHOOK = "claims.validate.gpu2dra.io"


# The exporter with secure metrics, its one reader a ServiceAccount the test makes a token of.
READER = "prometheus"
SECURE_EXPORTER = [
    word
    for value in (
        "exporter.enabled=true",
        "exporter.secureMetrics.enabled=true",
        f"exporter.secureMetrics.readers[0].name={READER}",
        f"exporter.secureMetrics.readers[0].namespace={RELEASE_NAMESPACE}",
    )
    for word in ("--set", value)
]


def values(tag: str) -> list[str]:
    """What a user sets to run an image they built and loaded themselves; and, as the rest of
    the suite, `inTree: translate` beside the driver chart's gpu.nvidia.com (in_tree_policy)."""
    sets = ["image.registry=", f"image.repository=localhost/{NAME}", f"image.tag={tag}"]
    sets.append("image.pullPolicy=Never")
    return [word for value in sets for word in ("--set", value)] + in_tree_values("translate")


@pytest.fixture(scope="module")
def node(
    request: pytest.FixtureRequest,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RealNode]:
    """The real node, its pods on a network that reaches the host and the API server, with
    gpu2dra's image in its containerd under two tags."""
    image = find_bin_dir() / "image" / f"{NAME}.tar"
    if not image.is_file():
        missing(f"{image} is missing: run `bash tests/image/build.sh` (as root)")
    work_dir = tmp_path_factory.mktemp("node")
    for real in running_node(
        request, control_plane, api_client, work_dir, DEVICES, pod_network=True
    ):
        real.ctr("images", "import", str(image))
        real.ctr(
            "images", "tag", "--force", f"localhost/{NAME}:{VERSION}", f"localhost/{NAME}:{NEXT}"
        )
        yield real


@pytest.fixture(scope="module")
def installed(
    control_plane: ControlPlane, api_client: client.ApiClient, node: RealNode
) -> Iterator[float]:
    """The chart installed and both webhook pods Ready; the seconds that took."""
    create_nvidia_device_classes(api_client)
    started = time.monotonic()
    control_plane.run_helm(
        "install",
        NAME,
        str(CHART),
        "--namespace",
        RELEASE_NAMESPACE,
        "--create-namespace",
        *values(VERSION),
        *SECURE_EXPORTER,
        "--wait",
        "--timeout",
        "3m",
    )
    ready = time.monotonic() - started
    try:
        yield ready
    finally:
        subprocess.run(
            [
                str(control_plane.helm),
                "--kubeconfig",
                str(control_plane.kubeconfig),
                "uninstall",
                NAME,
                "--namespace",
                RELEASE_NAMESPACE,
                "--ignore-not-found",
                "--wait",
            ],
            capture_output=True,
            check=False,
        )


def webhook_pods(api: client.ApiClient) -> list[Obj]:
    listed = client.CoreV1Api(api).list_namespaced_pod(
        RELEASE_NAMESPACE,
        # The webhook's pods, not the helm test hook's (component test) that stays after it ran.
        label_selector=f"app.kubernetes.io/name={NAME},app.kubernetes.io/component=webhook",
    )
    return [api.sanitize_for_serialization(p) for p in listed.items]


def exec_in(plane: ControlPlane, pod: str, *command: str) -> subprocess.CompletedProcess[str]:
    return plane.run_kubectl("exec", "-n", RELEASE_NAMESPACE, pod, "--", *command)


def gpu_pod(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "env | sort; sleep 3600"],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }


def test_the_kubelet_runs_the_webhook_as_the_chart_hardens_it(
    control_plane: ControlPlane, api_client: client.ApiClient, installed: float
) -> None:
    pods = webhook_pods(api_client)
    assert len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods)
    pod = pods[0]["metadata"]["name"]
    assert exec_in(control_plane, pod, "id", "-u").stdout.strip() == "65532"
    status = exec_in(control_plane, pod, "cat", "/proc/1/status").stdout
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert fields["CapEff"].strip() == "0000000000000000"
    assert fields["NoNewPrivs"].strip() == "1"
    assert fields["Seccomp"].strip() == "2"  # RuntimeDefault
    readonly = exec_in(control_plane, pod, "touch", "/probe")
    assert readonly.returncode != 0 and "Read-only file system" in readonly.stderr
    version = exec_in(control_plane, pod, "gpu2dra", "--version").stdout
    assert version.startswith(f"gpu2dra {VERSION} (")


def test_the_image_runs_the_cli_given_a_command(
    api_client: client.ApiClient, installed: float, namespace: str
) -> None:
    """The image's entrypoint is gpu2dra and serve only its default command: a pod of the image
    whose args are `translate -f FILE` translates the manifest it mounts, as `docker run IMAGE
    translate -f -` would, and exits 0."""
    core = client.CoreV1Api(api_client)
    manifest = yaml.safe_dump(gpu_pod("trainer"))
    core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="manifest"), data={"pod.yaml": manifest}
        ),
    )
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "translate"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "gpu2dra",
                    "image": f"localhost/{NAME}:{VERSION}",
                    "imagePullPolicy": "Never",
                    "args": ["translate", "-f", "/in/pod.yaml"],
                    "volumeMounts": [{"name": "in", "mountPath": "/in"}],
                }
            ],
            "volumes": [{"name": "in", "configMap": {"name": "manifest"}}],
        },
    }
    core.create_namespaced_pod(namespace, client.V1Pod.model_validate(body))

    def finished() -> str | None:
        phase = core.read_namespaced_pod("translate", namespace).status.phase
        return phase if phase in ("Succeeded", "Failed") else None

    assert wait_for(finished, 120, "the translate pod to finish") == "Succeeded"
    out = core.read_namespaced_pod_log("translate", namespace)
    assert "resourceClaimTemplateName: gpu2dra-gpu-x1-" in out
    assert "kind: ResourceClaimTemplate" in out


def test_the_exporter_serves_metrics_over_https_to_its_reader_only(
    api_client: client.ApiClient, installed: float
) -> None:
    """exporter.secureMetrics from the image on the kubelet: Ready through its HTTPS probes
    (the --wait of the install), and its /metrics, reached at the pod's address as
    Prometheus reaches it, answers the bound reader's token and refuses everyone else."""
    core = client.CoreV1Api(api_client)
    (pod,) = core.list_namespaced_pod(
        RELEASE_NAMESPACE, label_selector="app.kubernetes.io/component=exporter"
    ).items
    assert pod.status.pod_ip
    core.create_namespaced_service_account(
        RELEASE_NAMESPACE, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=READER))
    )
    token = core.create_namespaced_service_account_token(
        READER,
        RELEASE_NAMESPACE,
        client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[])),
    ).status.token
    url = f"https://{pod.status.pod_ip}:9464/metrics"
    unverified = ssl._create_unverified_context()  # its certificate is self-signed

    def get(bearer: str | None) -> tuple[int, str]:
        request = urllib.request.Request(url)
        if bearer:
            request.add_header("Authorization", f"Bearer {bearer}")
        try:
            with urllib.request.urlopen(request, timeout=10, context=unverified) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    status, body = get(token)
    assert status == 200 and "# TYPE gpu2dra_pod_gpu_info gauge" in body
    assert get(None) == (401, "a bearer token is required\n")
    assert get("forged")[0] == 401


def test_helm_test_runs_doctor_in_the_cluster(
    control_plane: ControlPlane, api_client: client.ApiClient, installed: float
) -> None:
    """The chart's test hook: `gpu2dra doctor` as a pod with its read-only ServiceAccount,
    reading the cluster and reaching the webhooks through their Service; helm test fails
    when a check FAILs."""
    done = subprocess.run(
        [
            str(control_plane.helm),
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "test",
            NAME,
            "--namespace",
            RELEASE_NAMESPACE,
            "--logs",
            "--timeout",
            "3m",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert f"TEST SUITE:     {NAME}-doctor" in said and "Phase:          Succeeded" in said, said
    # doctor's own lines, from the pod's log: its checks ran against this cluster.
    assert re.search(r"^PASS  webhooks ", said, re.M), said
    assert not re.search(r"^FAIL ", said, re.M), said


def test_a_gpu_pod_is_translated_by_the_charts_pods_and_runs_on_its_device(
    control_plane: ControlPlane, api_client: client.ApiClient, installed: float, namespace: str
) -> None:
    label(api_client, namespace, "enabled")
    checks = control_plane.webhook_calls(CLAIMS_WEBHOOK)
    stored, _ = control_plane.create(namespace, gpu_pod("trainer"))
    assert stored["spec"]["resourceClaims"], "the API server's answer holds the claims"
    (template,) = templates_in(api_client, namespace)
    assert template["metadata"]["labels"]["app.kubernetes.io/managed-by"] == NAME
    # The template its ServiceAccount created was not sent back to gpu2dra to be checked
    # (the first pod of a shape waits for that create); anyone else's template still is.
    assert control_plane.webhook_calls(CLAIMS_WEBHOOK) == checks
    squatter = {
        **template,
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {**template["metadata"], "name": "gpu2dra-squat"},
    }
    for field in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        squatter["metadata"].pop(field, None)
    refused = control_plane.run_kubectl("create", "-n", namespace, "-f", "-", stdin=squatter)
    assert refused.returncode != 0 and "reserved to gpu2dra" in refused.stderr, refused.stderr
    assert control_plane.webhook_calls(CLAIMS_WEBHOOK) == checks + 1
    running = wait_for(
        lambda: (
            (p := read_pod(api_client, namespace, "trainer"))["status"].get("phase") == "Running"
            and p
        ),
        90,
        "the translated pod to run",
    )
    assert running["spec"]["nodeName"] == REAL_NODE_NAME
    logs = control_plane.kubectl("logs", "-n", namespace, "trainer")
    uuid = {d["name"]: d["attributes"]["uuid"]["string"] for d in DEVICES}
    seen = [line for line in logs.splitlines() if line.startswith("GPU2DRA_DEVICE_")]
    assert len(seen) == 1 and seen[0].split("=", 1)[1] in uuid.values()


class Load:
    """GPU pods created at a steady rate in `namespace` from a thread, until stop(): what
    was created, and every create that failed."""

    def __init__(self, api: client.ApiClient, namespace: str, per_second: float) -> None:
        self.api, self.namespace, self.interval = api, namespace, 1 / per_second
        self.created: list[str] = []
        self.failed: list[str] = []
        self.warnings: dict[str, str] = {}  # the API server's Warning headers, by pod
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        core = client.CoreV1Api(self.api)
        n = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            name = f"load-{n}"
            n += 1
            try:
                answer = core.create_namespaced_pod(
                    self.namespace, gpu_pod(name), _preload_content=False
                )
                self.created.append(name)
                self.warnings[name] = answer.headers.get("Warning", "")
            except Exception as err:  # every failure is the finding
                self.failed.append(f"{name}: {err}")
            next_at += self.interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def untranslated(plane: ControlPlane, api: client.ApiClient, namespace: str, load: Load) -> str:
    """The pods of `load` the API server stored without gpu2dra's claims, with the warnings
    their creates got and what the API server logged of its calls to gpu2dra ("" when none
    was missed)."""
    missed = {
        n: load.warnings.get(n, "")
        for n in load.created
        if not read_pod(api, namespace, n)["spec"].get("resourceClaims")
    }
    if not missed:
        return ""
    log = (plane.log_dir / "kube-apiserver.log").read_text(errors="replace").splitlines()
    calls = [line for line in log if "gpu2dra" in line and "webhook" in line][-10:]
    return f"{missed} admitted untranslated; the API server logged:\n" + "\n".join(calls)


def rollout(plane: ControlPlane) -> None:
    plane.kubectl(
        "rollout", "status", "-n", RELEASE_NAMESPACE, f"deployment/{NAME}", "--timeout=180s"
    )


def test_a_rolling_upgrade_under_load_translates_every_pod(
    control_plane: ControlPlane, api_client: client.ApiClient, installed: float, namespace: str
) -> None:
    """helm upgrade to another image tag while pods are created at 4/s through the whole
    rollout: every create succeeds and every pod is translated."""
    label(api_client, namespace, "enabled")
    load = Load(api_client, namespace, per_second=4)
    try:
        time.sleep(2)
        control_plane.run_helm("upgrade", NAME, str(CHART), "-n", RELEASE_NAMESPACE, *values(NEXT))
        rollout(control_plane)
        time.sleep(2)
    finally:
        load.stop()
    serving = [p for p in webhook_pods(api_client) if not p["metadata"].get("deletionTimestamp")]
    assert {c["image"] for p in serving for c in p["spec"]["containers"]} == {
        f"localhost/{NAME}:{NEXT}"
    }
    assert load.failed == [] and len(load.created) >= 20
    assert untranslated(control_plane, api_client, namespace, load) == ""


def test_a_webhook_pod_deleted_under_load_is_covered_by_the_other(
    control_plane: ControlPlane, api_client: client.ApiClient, installed: float, namespace: str
) -> None:
    """One of the two webhook pods deleted while pods are created at 4/s: the other serves
    until the Deployment replaces it; every pod is translated."""
    label(api_client, namespace, "enabled")
    load = Load(api_client, namespace, per_second=4)
    try:
        time.sleep(2)
        victim = webhook_pods(api_client)[0]["metadata"]["name"]
        control_plane.kubectl("delete", "pod", "-n", RELEASE_NAMESPACE, victim, "--wait=false")
        rollout(control_plane)
        wait_for(
            lambda: sum(_ready(p) for p in webhook_pods(api_client)) == 2, 120, "2 Ready again"
        )
        time.sleep(2)
    finally:
        load.stop()
    assert load.failed == [] and len(load.created) >= 12
    assert untranslated(control_plane, api_client, namespace, load) == ""


def _ready(pod: Obj) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    deleting = pod["metadata"].get("deletionTimestamp")
    return not deleting and any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_uninstall_leaves_running_gpu_pods_and_their_templates(
    control_plane: ControlPlane, api_client: client.ApiClient, installed: float, namespace: str
) -> None:
    """Last in the module: helm uninstall removes the webhook and its configurations; the GPU
    pods it translated keep running, and their templates stay (what the install guide says
    an uninstall leaves)."""
    label(api_client, namespace, "enabled")
    control_plane.create(namespace, gpu_pod("kept"))
    wait_for(
        lambda: read_pod(api_client, namespace, "kept")["status"].get("phase") == "Running",
        90,
        "the translated pod to run",
    )
    control_plane.run_helm("uninstall", NAME, "-n", RELEASE_NAMESPACE, "--wait")
    admission = client.AdmissionregistrationV1Api(api_client)
    names = [c.metadata.name for c in admission.list_mutating_webhook_configuration().items]
    names += [c.metadata.name for c in admission.list_validating_webhook_configuration().items]
    assert NAME not in names
    time.sleep(3)
    kept = read_pod(api_client, namespace, "kept")
    assert kept["status"]["phase"] == "Running" and kept["spec"]["resourceClaims"]
    assert [
        t["metadata"]["labels"]["app.kubernetes.io/managed-by"]
        for t in templates_in(api_client, namespace)
    ] == [NAME]
    # Without the webhook a new GPU pod is admitted as it is, on the device plugin.
    after, _ = control_plane.create(namespace, gpu_pod("after"))
    assert "resourceClaims" not in after["spec"]
