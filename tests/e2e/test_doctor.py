"""`gpu2dra doctor` against the real control plane: every check's PASS, WARN and FAIL."""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from app.webhook.certs import make_certs
from tests.e2e.inspecting import (
    Obj,
    create_crd,
    doctor,
    doctor_with_source,
    gpu2dra,
    kubeconfig_for,
    train_job,
    train_job_crd,
    unschedulable,
)
from tests.support.cluster import (
    add_gpu_node,
    create_namespace,
    delete_namespace,
    device_class,
    gpu_pod,
    wait_for,
    wait_for_default_service_account,
)
from tests.support.controlplane import ControlPlane, kubernetes_version
from tests.support.kueue import GATE_ON, KUEUE_CONFIG, KUEUE_MAPPED, kueue_objects, remove_kueue
from tests.support.webhook import Webhook, register, render_chart, unregister

# Each test publishes the devices it judges: none elsewhere.
pytestmark = pytest.mark.usefixtures("no_devices_elsewhere")

RESOURCE = ("resource.k8s.io", "v1")
# Every check `gpu2dra doctor` runs, in the order it prints them.
EVERY_CHECK = (
    "kubernetes",
    "deviceclasses",
    "resourceslices",
    "coexistence",
    "conversions",
    "sharing",
    "webhooks",
    "webhook-tls",
    "webhook-service",
    "namespaces",
    "paths",
    "quota",
    "kueue",
    "preemption",
    "autoscaling",
    "capacity",
    "dcgm-exporter",
    "attribution",
)


def test_ready_cluster_passes_every_check(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    gpu_nodes: list[str],
) -> None:
    node = add_gpu_node(api_client, gpu_nodes, gpus=2, mig={1: ["3g.20gb", "3g.20gb"]})
    # The driver chart's gpu.nvidia.com serves nvidia.com/gpu in-tree; the MIG profile it
    # publishes needs a class of its own to be served so too (doctor's paths check says so).
    _, checks = doctor(control_plane)
    assert checks["paths"]["status"] == "WARN" and "3g.20gb" in checks["paths"]["summary"]
    printed = gpu2dra(control_plane.kubeconfig, "deviceclasses", check=0).stdout
    control_plane.kubectl("apply", "-f", "-", stdin=printed)
    try:
        code, checks = doctor(control_plane)
        text = gpu2dra(control_plane.kubeconfig, "doctor", check=0).stdout
    finally:
        control_plane.kubectl("delete", "-f", "-", stdin=printed)
    assert [(name, c["status"]) for name, c in checks.items()] == [
        (name, "PASS") for name in EVERY_CHECK
    ]
    assert code == 0
    assert "resource.k8s.io/v1 served" in checks["kubernetes"]["summary"]
    assert (
        "gpu.nvidia.com selects 1, mig.nvidia.com selects 2" in checks["resourceslices"]["summary"]
    )
    assert f"gpu.nvidia.com on node {node}: 3 device(s)" in checks["resourceslices"]["details"][0]
    assert "the caBundle verifies the serving certificate" in checks["webhook-tls"]["summary"]

    assert text.startswith("policy: embedded default\nPASS  kubernetes ")
    assert "fix:" not in text


def test_missing_device_class_fails(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane
) -> None:
    custom = client.CustomObjectsApi(api_client)
    custom.delete_cluster_custom_object(*RESOURCE, "deviceclasses", "mig.nvidia.com")
    try:
        code, checks = doctor(control_plane)
    finally:
        custom.create_cluster_custom_object(
            *RESOURCE, "deviceclasses", device_class("mig.nvidia.com", "mig")
        )
    assert code == 1
    check = checks["deviceclasses"]
    assert check["status"] == "FAIL"
    assert "missing mig.nvidia.com (for nvidia.com/mig-*)" in check["summary"]
    assert check["fix"] == (
        "install the NVIDIA DRA driver (its chart creates gpu.nvidia.com and mig.nvidia.com), "
        "or change the policy's mappings"
    )


def test_no_resource_slices_fails(webhook: Webhook, control_plane: ControlPlane) -> None:
    code, checks = doctor(control_plane)
    assert code == 1
    assert checks["resourceslices"]["status"] == "FAIL"
    assert "no ResourceSlice publishes a device" in checks["resourceslices"]["summary"]


def test_class_selecting_no_device_warns(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    gpu_nodes: list[str],
) -> None:
    add_gpu_node(api_client, gpu_nodes, gpus=1)  # no MIG partitions anywhere
    code, checks = doctor(control_plane)
    assert code == 0
    check = checks["resourceslices"]
    assert check["status"] == "WARN"
    assert "no device for mig.nvidia.com (for nvidia.com/mig-*)" in check["summary"]


def foreign_slice(driver: str, devices: int) -> Obj:
    """A ResourceSlice of another DRA driver, published for all nodes."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{driver}-pool"},
        "spec": {
            "driver": driver,
            "allNodes": True,
            "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"dev-{i}", "attributes": {"model": {"string": "x"}}}
                for i in range(devices)
            ],
        },
    }


def test_devices_of_no_mapped_class_fail(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane
) -> None:
    custom = client.CustomObjectsApi(api_client)
    body = foreign_slice("nic.example.com", 2)
    custom.create_cluster_custom_object(*RESOURCE, "resourceslices", body)
    try:
        code, checks = doctor(control_plane)
    finally:
        custom.delete_cluster_custom_object(*RESOURCE, "resourceslices", body["metadata"]["name"])
    assert code == 1
    check = checks["resourceslices"]
    assert check["status"] == "FAIL"
    assert check["summary"] == (
        "2 device(s) in 1 pool(s); gpu.nvidia.com selects 0, mig.nvidia.com selects 0: "
        "no device belongs to a DeviceClass gpu2dra maps to"
    )
    assert check["details"] == [
        "nic.example.com on no single node: 2 device(s) (gpu.nvidia.com: 0, mig.nvidia.com: 0)"
    ]


def test_class_selector_failing_on_a_device_warns(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    gpu_nodes: list[str],
) -> None:
    """A class that reads `profile` unguarded: whole GPUs have no such attribute."""
    node = add_gpu_node(api_client, gpu_nodes, gpus=2, mig={1: ["3g.20gb", "3g.20gb"]})
    custom = client.CustomObjectsApi(api_client)
    unguarded = device_class("mig.nvidia.com", "mig")
    unguarded["spec"]["selectors"] = [
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile.startsWith('3g')"}}
    ]
    replace_device_class(custom, unguarded)
    try:
        code, checks = doctor(control_plane)
    finally:
        replace_device_class(custom, device_class("mig.nvidia.com", "mig"))
    assert code == 0
    check = checks["resourceslices"]
    assert check["status"] == "WARN"
    assert "a DeviceClass selector fails on 1 device(s)" in check["summary"]
    assert "gpu.nvidia.com selects 1, mig.nvidia.com selects 2" in check["summary"]
    assert (
        f"DeviceClass mig.nvidia.com on gpu.nvidia.com/{node}/gpu-0: no such key: profile"
        in check["details"]
    )
    assert "has()" in check["fix"]


def replace_device_class(custom: client.CustomObjectsApi, body: Obj) -> None:
    name = body["metadata"]["name"]
    current = custom.get_cluster_custom_object(*RESOURCE, "deviceclasses", name)
    body = {
        **body,
        "metadata": {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
    }
    custom.replace_cluster_custom_object(*RESOURCE, "deviceclasses", name, body)


def test_node_offering_gpus_twice_fails(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    gpu_nodes: list[str],
) -> None:
    both = add_gpu_node(api_client, gpu_nodes, gpus=2)
    add_gpu_node(api_client, gpu_nodes, gpus=1)
    node = client.CoreV1Api(api_client).read_node(both)
    allocatable = {**node.status.allocatable, "nvidia.com/gpu": "2"}
    client.CoreV1Api(api_client).patch_node_status(
        both, {"status": {"allocatable": allocatable, "capacity": allocatable}}
    )
    code, checks = doctor(control_plane)
    assert code == 1
    check = checks["coexistence"]
    assert check["status"] == "FAIL"
    assert check["summary"].endswith(f"through DRA: {both}")
    assert check["details"] == [f"node {both}: nvidia.com/gpu=2 in allocatable and 2 DRA device(s)"]


def test_wrong_ca_bundle_fails(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    other = make_certs(["elsewhere"], []).write(tmp_path)
    wrong = base64.b64encode(other["ca.crt"].read_bytes()).decode()
    register(api_client, webhook.rendered(f"tls.caBundle={wrong}"))
    try:
        code, checks = doctor(control_plane)
    finally:
        register(api_client, webhook.rendered())
    assert code == 1
    check = checks["webhook-tls"]
    assert check["status"] == "FAIL"
    assert "the serving certificate does not verify" in check["summary"]
    assert checks["webhooks"]["status"] == "PASS"


def with_ca_bundle(docs: list[Obj], bundle: str | None) -> list[Obj]:
    """The webhook configurations among `docs` with `bundle` as every caBundle (None: none)."""
    for doc in docs:
        for hook in doc.get("webhooks") or []:
            hook["clientConfig"].pop("caBundle", None)
            if bundle is not None:
                hook["clientConfig"]["caBundle"] = bundle
    return docs


@pytest.mark.parametrize(
    ("bundle", "problem"),
    [
        (None, "no caBundle is set"),
        (
            base64.b64encode(
                b"-----BEGIN CERTIFICATE-----\nbm9wZQ==\n-----END CERTIFICATE-----\n"
            ).decode(),
            "the caBundle is not a usable PEM CA certificate",
        ),
    ],
    ids=["none", "not-pem"],
)
def test_unusable_ca_bundle_fails(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    bundle: str | None,
    problem: str,
) -> None:
    register(api_client, with_ca_bundle(webhook.rendered(), bundle))
    try:
        code, checks = doctor(control_plane)
    finally:
        register(api_client, webhook.rendered())
    assert code == 1
    check = checks["webhook-tls"]
    assert check["status"] == "FAIL"
    assert check["summary"].startswith(f"gpu2dra -> 127.0.0.1:{webhook.port}: {problem}")
    assert "caBundle" in check["fix"]


def test_api_server_refuses_a_ca_bundle_that_is_not_base64(
    webhook: Webhook, control_plane: ControlPlane
) -> None:
    """So doctor never meets one: the bundle is bytes, sent as base64."""
    (mutating,) = with_ca_bundle(
        [d for d in webhook.rendered() if d["kind"] == "MutatingWebhookConfiguration"], "%%%"
    )
    done = control_plane.run_kubectl("apply", "--dry-run=server", "-f", "-", stdin=mutating)
    assert done.returncode != 0
    assert "illegal base64" in done.stderr


def test_webhook_down_or_unregistered_fails(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane
) -> None:
    webhook.stop()
    try:
        code, checks = doctor(control_plane)
    finally:
        webhook.start()
    assert code == 1
    assert checks["webhook-service"]["status"] == "FAIL"
    assert "cannot reach" in checks["webhook-service"]["summary"]
    assert checks["webhook-tls"]["status"] == "WARN"

    unregister(api_client)
    try:
        code, checks = doctor(control_plane)
    finally:
        register(api_client, webhook.rendered())
    assert code == 1
    assert checks["webhooks"]["status"] == "FAIL"
    assert (
        "no gpu2dra MutatingWebhookConfiguration or ValidatingWebhookConfiguration"
        in (checks["webhooks"]["summary"])
    )


@contextlib.contextmanager
def installed_release(
    webhook: Webhook, plane: ControlPlane, release_ns: str, *values: str
) -> Iterator[str]:
    """The chart's ConfigMap, Service and webhook configurations as installed in `release_ns`,
    in place of the test webhook's registration; no gpu2dra pod runs."""
    docs = render_chart(plane.helm, *values, namespace=release_ns)
    kept = [
        d
        for d in docs
        if d["kind"] in ("ConfigMap", "Service") or d["kind"].endswith("WebhookConfiguration")
    ]
    with plane.api_client() as api:
        unregister(api)
        plane.kubectl("create", "namespace", release_ns)
        try:
            listed = {"kind": "List", "apiVersion": "v1", "items": kept}
            plane.kubectl("apply", "-f", "-", stdin=json.dumps(listed))
            yield release_ns
        finally:
            for doc in kept:
                if doc["kind"].endswith("WebhookConfiguration"):
                    unregister(api, doc["metadata"]["name"])
            plane.kubectl("delete", "namespace", release_ns, "--wait=false")
            register(api, webhook.rendered())


def test_release_without_ready_endpoints_fails(
    webhook: Webhook, control_plane: ControlPlane
) -> None:
    """The chart's objects as installed (Service, ConfigMap, webhooks), no pod running."""
    values = ("policy.defaultMode=audit", "webhook.timeoutSeconds=1")
    with installed_release(webhook, control_plane, "doctor-release", *values) as release_ns:
        code, checks, source = doctor_with_source(control_plane)
    assert code == 1
    assert checks["webhook-service"]["status"] == "FAIL"
    summary = checks["webhook-service"]["summary"]
    assert f"Service {release_ns}/gpu2dra: 0 ready endpoint(s)" in summary
    # The API server would call gpu2dra.doctor-release.svc, a name only the cluster resolves.
    assert checks["webhook-tls"]["status"] == "WARN"
    assert f"cannot reach gpu2dra.{release_ns}.svc:443" in checks["webhook-tls"]["summary"]
    # The policy comes from the release's ConfigMap: audit by default, its namespace skipped.
    assert source == f"ConfigMap {release_ns}/gpu2dra"
    namespaces = checks["namespaces"]["summary"]
    assert "default audit" in namespaces
    assert "2 never changed" in namespaces  # kube-system and doctor-release


def endpoint_slice(namespace: str, service: str, ready: dict[str, bool]) -> Obj:
    """What the EndpointSlice controller would publish for the Service's pods (address ->
    ready); made by hand, as there is no kubelet to make pods ready."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-by-hand",
            "namespace": namespace,
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "e2e.gpu2dra.io",
            },
        },
        "addressType": "IPv4",
        "ports": [{"name": "https", "port": 8443, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": [address], "conditions": {"ready": up}} for address, up in ready.items()
        ],
    }


def test_service_with_a_ready_endpoint_passes(
    webhook: Webhook, control_plane: ControlPlane
) -> None:
    with installed_release(webhook, control_plane, "doctor-serving") as release_ns:
        slice_ = endpoint_slice(release_ns, "gpu2dra", {"10.244.0.7": True, "10.244.0.8": False})
        control_plane.kubectl("apply", "-f", "-", stdin=slice_)
        _, checks = doctor(control_plane)
    check = checks["webhook-service"]
    assert check["status"] == "PASS"
    assert check["summary"] == f"Service {release_ns}/gpu2dra: 1 ready endpoint(s)"
    assert checks["webhook-tls"]["status"] == "WARN"
    assert f"cannot reach gpu2dra.{release_ns}.svc:443" in checks["webhook-tls"]["summary"]


# ---- resource.k8s.io/v1 switched off ------------------------------------------------------


class ApiServerOnly(ControlPlane):
    """etcd and an API server with extra flags. No controller-manager or scheduler: without
    resource.k8s.io/v1 their DRA informers never sync, and doctor needs neither."""

    def __init__(self, bin_dir: Path, work_dir: Path, *flags: str) -> None:
        super().__init__(bin_dir, work_dir)
        self.flags = flags

    def _spawn(self, name: str, args: list[str]) -> None:
        if name == "kube-apiserver":
            # The Node authorizer watches ResourceSlices: without v1 it never becomes ready.
            args = [a for a in args if not a.startswith("--authorization-mode=")]
            args += ["--authorization-mode=RBAC", *self.flags]
        super()._spawn(name, args)

    def _start_controller_manager(self) -> None:
        return

    def _start_scheduler(self) -> None:
        return


@pytest.mark.parametrize(
    ("runtime_config", "served"),
    [
        ("resource.k8s.io/v1=false", "(no resource.k8s.io version is)"),
        ("resource.k8s.io/v1=false,resource.k8s.io/v1beta2=true", "(served: v1beta2)"),
    ],
    ids=["nothing", "v1beta2"],
)
def test_v1_not_served_fails(
    control_plane: ControlPlane, release: str, tmp_path: Path, runtime_config: str, served: str
) -> None:
    flag = f"--runtime-config={runtime_config}"
    with ApiServerOnly(control_plane.bin_dir, tmp_path, flag) as plane:
        code, checks = doctor(plane)
    assert code == 1
    check = checks["kubernetes"]
    assert check["status"] == "FAIL"
    version = kubernetes_version(release)
    assert check["summary"] == f"{version}: resource.k8s.io/v1 is not served {served}"
    assert check["fix"] == "enable the API with --runtime-config=resource.k8s.io/v1=true"
    for name in ("deviceclasses", "resourceslices"):
        assert checks[name]["summary"] == "not checked: resource.k8s.io/v1 is not served"


# ---- read permissions are enough ---------------------------------------------------------


READONLY_GROUP = "readonly.gpu2dra.io"


def test_commands_need_only_the_read_only_role(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    gpu_nodes: list[str],
    tmp_path: Path,
) -> None:
    """doctor, explain (on a pod whose claim is unallocated: it reads everything) and report
    with a token bound to the chart's read-only role; then with the binding removed."""
    roles = [
        d
        for d in render_chart(control_plane.helm, "readOnlyRole.create=true")
        if d["kind"] == "ClusterRole" and "-readonly" in d["metadata"]["name"]
    ]
    assert {v for r in roles for rule in r.get("rules", []) for v in rule["verbs"]} <= {
        "get",
        "list",
    }
    (aggregate,) = [r["metadata"]["name"] for r in roles if "aggregationRule" in r]
    node = add_gpu_node(api_client, gpu_nodes, gpus=2, mig={1: ["7g.40gb"]})
    namespace = create_namespace(api_client, "reader-")
    crd = train_job_crd(READONLY_GROUP)
    extra = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": "read-trainjobs",
            "labels": {"gpu2dra.io/aggregate-to-readonly": "true"},
        },
        "rules": [{"apiGroups": [READONLY_GROUP], "resources": ["trainjobs"], "verbs": ["list"]}],
    }
    try:
        wait_for_default_service_account(api_client, namespace)
        webhook.set_mode(api_client, namespace, "enabled")
        control_plane.create(namespace, gpu_pod("big", {"nvidia.com/gpu": 2}))
        create_crd(control_plane, crd)
        control_plane.create(namespace, train_job("llm", READONLY_GROUP, 4))
        control_plane.kubectl(
            "apply", "-f", "-", stdin={"kind": "List", "apiVersion": "v1", "items": roles}
        )
        control_plane.kubectl("create", "serviceaccount", "reader", "-n", namespace)
        control_plane.kubectl(
            "create",
            "clusterrolebinding",
            aggregate,
            f"--clusterrole={aggregate}",
            f"--serviceaccount={namespace}:reader",
        )
        token = control_plane.kubectl("create", "token", "reader", "-n", namespace).strip()
        reader = kubeconfig_for(control_plane, tmp_path / "reader", token=token)
        unschedulable(api_client, namespace, "big")

        def rows() -> Obj | None:
            done = gpu2dra(reader, "report", "-A", "-o", "json", check=0)
            body: Obj = json.loads(done.stdout)
            return body if not any("trainjobs" not in u for u in body["unreadable"]) else None

        # The controller-manager fills the aggregated role: only custom resources stay hidden.
        report = wait_for(rows, 30, "the read-only role's aggregation")
        assert [u.split(" (")[0] for u in report["unreadable"]] == ["trainjobs"]
        assert "403" in report["unreadable"][0]

        checks = json.loads(gpu2dra(reader, "doctor", "-o", "json", check=None).stdout)
        assert [c["summary"] for c in checks["checks"] if "cannot read" in c["summary"]] == []
        text = gpu2dra(reader, "explain", "pod", "big", "-n", namespace, check=3).stdout
        assert "cannot read" not in text
        for line in (
            "  PASS  translated by gpu2dra: claim(s) main-gpu\n",
            "  PASS  claim main-gpu: gpu2dra's ResourceClaimTemplate gpu2dra-gpu-x2-",
            "  FAIL  request gpu asks for 2 x gpu.nvidia.com: only 1 device(s) match",
            f"          {node}/gpu-0: matches and is free\n",
            "Warning FailedScheduling",
        ):
            assert line in text

        control_plane.kubectl("apply", "-f", "-", stdin=extra)

        def listed() -> Obj | None:
            body = rows()
            return body if body is not None and not body["unreadable"] else None

        mine = [
            n
            for n in wait_for(listed, 30, "trainjobs to be readable")["namespaces"]
            if n["name"] == namespace
        ]
        assert [(w["kind"], w["name"], w["gpus"]) for w in mine[0]["workloads"]] == [
            ("TrainJob", "llm", {"nvidia.com/gpu": 4})
        ]

        control_plane.kubectl("delete", "clusterrolebinding", aggregate)

        def denied() -> bool:
            return "cannot read" in gpu2dra(reader, "doctor", check=None).stdout

        assert wait_for(denied, 30, "the binding's removal to take effect")
        done = gpu2dra(reader, "explain", "pod", "big", "-n", namespace, check=1)
        path = f"/api/v1/namespaces/{namespace}/pods/big"
        assert done.stderr.startswith(f"gpu2dra: cannot read pod {namespace}/big: GET {path}: 403 ")
        table = gpu2dra(reader, "report", "-A", check=0).stdout
        assert table.startswith("no workload asks for legacy GPU resources in what could be read\n")
        assert "cannot read namespaces (GET /api/v1/namespaces: 403 " in table
        assert "cannot read pods (GET /api/v1/pods: 403 " in table
    finally:
        for role in (*roles, extra):
            control_plane.kubectl(
                "delete", "clusterrole", role["metadata"]["name"], "--ignore-not-found"
            )
        control_plane.kubectl("delete", "clusterrolebinding", aggregate, "--ignore-not-found")
        control_plane.kubectl("delete", "crd", crd["metadata"]["name"], "--ignore-not-found")
        delete_namespace(api_client, namespace)


def test_kueue_that_cannot_count_claims_fails(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane
) -> None:
    """Kueue v0.17 with its DRA gate off ignores claims: FAIL; on without mappings: FAIL;
    on and mapped: WARN, since it refuses the CEL selectors of MIG claims."""
    seen = {}
    try:
        for config, args, status in (
            (KUEUE_MAPPED, (), "FAIL"),
            (KUEUE_CONFIG, (GATE_ON,), "FAIL"),
            (KUEUE_MAPPED, (GATE_ON,), "WARN"),
        ):
            control_plane.kubectl("apply", "-f", "-", stdin=kueue_objects(config, *args))
            code, checks = doctor(control_plane)
            seen[status, bool(args)] = checks["kueue"]
            assert checks["kueue"]["status"] == status
            assert code == 1 or status != "FAIL"
    finally:
        remove_kueue(control_plane)
    off, unmapped, mapped = seen["FAIL", False], seen["FAIL", True], seen["WARN", True]
    assert "DRA gate DynamicResourceAllocation off (its default)" in off["summary"]
    assert "--feature-gates=DynamicResourceAllocation=true" in off["fix"]
    assert "has no entry for gpu.nvidia.com, mig.nvidia.com" in unmapped["summary"]
    assert "pods of its pod and deployment integration" in unmapped["summary"]
    assert "refuses a claim with CEL selectors" in mapped["summary"]
