"""The control plane itself, without the webhook, on every release: each component reports the
release it was built from, and a hand-written ResourceClaimTemplate gets a ResourceClaim from
the controller-manager and two fake GPUs from the scheduler. Also the harness around it: how
tests/k8s/build.sh decides to rebuild, when the tests may skip, and which logs a failure leaves
behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from app.core.catalog import Catalog
from app.core.policy import load_policy
from app.core.translate import translate
from tests.support.cluster import (
    GPU_DRIVER,
    allocated_devices,
    create_gpu_node,
    create_node,
    create_nvidia_device_classes,
    delete_node,
    gpu_devices,
    gpu_resource_slice,
    pod_resource_claims,
    wait_for,
    wait_for_pod_scheduled,
)
from tests.support.controlplane import (
    K8S_DIR,
    RELEASE_BINARIES,
    ControlPlane,
    kubernetes_version,
    releases,
)
from tests.support.failure_logs import copy_logs, copy_node_logs
from tests.support.tools import missing_tools

pytestmark = pytest.mark.every_release


def test_every_component_reports_the_release_built(
    control_plane: ControlPlane, api_client: client.ApiClient, release: str
) -> None:
    """The version ldflags of build.sh: /version, kubectl (client-go's copy) and --version."""
    want = kubernetes_version(release)  # from tests/k8s/<release>/go.mod, e.g. v1.37.2
    assert want.startswith(f"{release}.")
    version = client.VersionApi(api_client).get_code()
    assert version.git_version == want
    assert (version.major, version.minor) == tuple(release[1:].split("."))
    assert version.git_tree_state == "clean"

    shown = json.loads(control_plane.kubectl("version", "-o", "json"))
    assert shown["clientVersion"]["gitVersion"] == want
    assert shown["serverVersion"]["gitVersion"] == want
    assert "warning" not in control_plane.run_kubectl("version").stderr.lower()  # no skew
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        done = subprocess.run(
            [str(control_plane.bin_dir / name), "--version"], capture_output=True, text=True
        )
        assert done.stdout.strip() == f"Kubernetes {want}", (name, done.stdout, done.stderr)


@pytest.fixture
def gpu_node(api_client: client.ApiClient) -> Iterator[str]:
    """A node with two A100s, next to one without GPUs, so placement is DRA's doing."""
    suffix = uuid.uuid4().hex[:6]
    gpu_name, cpu_name = f"gpu-node-{suffix}", f"cpu-node-{suffix}"
    create_nvidia_device_classes(api_client)
    create_node(api_client, cpu_name)
    create_gpu_node(api_client, gpu_name, gpus=2)
    yield gpu_name
    delete_node(api_client, gpu_name)
    delete_node(api_client, cpu_name)


def test_scheduler_allocates_gpus_from_resource_slices(
    api_client: client.ApiClient, namespace: str, gpu_node: str
) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-gpus"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2},
                        }
                    ]
                }
            }
        },
    }
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaimtemplates", template
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer"},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}],
            "containers": [
                {
                    "name": "cuda",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "gpus"}]},
                }
            ],
        },
    }
    client.CoreV1Api(api_client).create_namespaced_pod(namespace, client.V1Pod.model_validate(pod))

    bound = wait_for_pod_scheduled(api_client, namespace, "trainer")

    assert bound["spec"]["nodeName"] == gpu_node
    claims = pod_resource_claims(api_client, bound)
    assert len(claims) == 1
    claim = claims[0]
    assert claim["metadata"]["name"].startswith("trainer-gpus-")
    assert claim["metadata"]["ownerReferences"][0]["name"] == "trainer"
    results = allocated_devices(api_client, bound)
    assert sorted((r["driver"], r["pool"], r["device"], r["request"]) for r in results) == [
        (GPU_DRIVER, gpu_node, "gpu-0", "gpu"),
        (GPU_DRIVER, gpu_node, "gpu-1", "gpu"),
    ]
    reserved = claim["status"]["reservedFor"]
    assert [(r["resource"], r["name"]) for r in reserved] == [("pods", "trainer")]


@pytest.fixture
def node_with_a_bare_gpu(api_client: client.ApiClient) -> Iterator[str]:
    """A node whose gpu-0 publishes no memory capacity (as the driver does when NVML does not
    report it) and whose gpu-1 is a whole A100-SXM4-40GB."""
    name = f"bare-{uuid.uuid4().hex[:6]}"
    create_nvidia_device_classes(api_client)
    node = create_node(api_client, name)
    devices = gpu_devices(name, gpus=2)
    del devices[0]["capacity"]["memory"]
    client.CustomObjectsApi(api_client).create_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", gpu_resource_slice(name, devices, owner=node)
    )
    yield name
    delete_node(api_client, name)


def _schedule(api: client.ApiClient, namespace: str, name: str, spec: dict[str, Any]) -> None:
    """Create the translated pod and its template, as the webhook would."""
    result = translate(spec, load_policy(None), Catalog.of(["gpu.nvidia.com", "mig.nvidia.com"]))
    for template in result.templates:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "resource.k8s.io", "v1", namespace, "resourceclaimtemplates", template
        )
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": result.spec}
    client.CoreV1Api(api).create_namespaced_pod(namespace, client.V1Pod.model_validate(pod))


def test_a_device_without_memory_is_passed_over(
    api_client: client.ApiClient, namespace: str, node_with_a_bare_gpu: str
) -> None:
    """gpu2dra's memory selector checks `'memory' in device.capacity[...]` first: the device
    that lacks it is not picked, and the pod gets the one that matches. The same selector
    without the check is a runtime error on gpu-0 that aborts the allocation."""
    node = node_with_a_bare_gpu
    spec = {
        "nodeSelector": {"nvidia.com/gpu.memory": "40960", "kubernetes.io/hostname": node},
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"limits": {"nvidia.com/gpu": 1}},
            }
        ],
    }
    _schedule(api_client, namespace, "guarded", spec)
    bound = wait_for_pod_scheduled(api_client, namespace, "guarded")
    assert bound["spec"]["nodeName"] == node
    assert [r["device"] for r in allocated_devices(api_client, bound)] == ["gpu-1"]

    unguarded = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "unguarded"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "selectors": [
                                    {
                                        "cel": {
                                            "expression": "device.capacity['gpu.nvidia.com']"
                                            ".memory.compareTo(quantity('40Gi')) == 0"
                                        }
                                    }
                                ],
                            },
                        }
                    ]
                }
            }
        },
    }
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaimtemplates", unguarded
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "unguarded"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "unguarded"}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(namespace, client.V1Pod.model_validate(pod))

    def refused() -> str | None:
        events = core.list_namespaced_event(
            namespace, field_selector="involvedObject.name=unguarded"
        ).items
        found = [e.message for e in events if e.reason == "FailedScheduling" and e.message]
        return found[0] if found else None

    message = wait_for(refused, 60, "a FailedScheduling event for the unguarded pod")
    assert "no such key: memory" in message, message
    assert not core.read_namespaced_pod("unguarded", namespace).spec.node_name


# ---- the harness -----------------------------------------------------------------------------

# Stands in for Go: `go version` says $FAKE_GO; `go build -o` and `go install` create the
# binaries as empty executables; every call is appended to $FAKE_GO_CALLS.
FAKE_GO = r"""#!/usr/bin/env bash
echo "$*" >> "$FAKE_GO_CALLS"
make() { touch "$1" && chmod +x "$1"; }
case "$1" in
  version) echo "go version $FAKE_GO linux/amd64" ;;
  install) make "$GOBIN/helm" ;;
  build)
    shift; out=""; packages=()
    while (($#)); do
      case "$1" in
        -o|-ldflags) [[ "$1" == -o ]] && out="$2"; shift 2 ;;
        -*) shift ;;
        *) packages+=("$1"); shift ;;
      esac
    done
    if [[ "$out" == */ ]]; then
      for p in "${packages[@]}"; do make "$out${p##*/}"; done
    else
      make "$out"
    fi ;;
esac
"""


def run_build(tmp_path: Path, go_version: str, *args: str) -> tuple[str, str]:
    """build.sh, from a copy of tests/k8s in tmp_path/k8s (so a test may edit a go.mod), into
    tmp_path/bin with the fake Go; (its output, the Go calls)."""
    k8s = tmp_path / "k8s"
    if not k8s.exists():
        shutil.copytree(K8S_DIR, k8s)
    fake = tmp_path / "fake-go"
    fake.mkdir(exist_ok=True)
    (fake / "go").write_text(FAKE_GO)
    (fake / "go").chmod(0o755)
    calls = tmp_path / "calls"
    calls.write_text("")
    env = {
        **os.environ,
        "PATH": f"{fake}:{os.environ['PATH']}",
        "FAKE_GO": go_version,
        "FAKE_GO_CALLS": str(calls),
        "GPU2DRA_BIN": str(tmp_path / "bin"),
    }
    done = subprocess.run(
        ["bash", str(k8s / "build.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, calls.read_text()


RELEASES = releases()
NEWEST, OLDEST = RELEASES[0], RELEASES[-1]
TIME = r"in \d+\.\d\ds"


def built(release: str) -> str:
    """build.sh's line for one release it built."""
    names = " ".join(("etcd", *sorted(set(RELEASE_BINARIES) - {"etcd"})))
    return f"built Kubernetes {kubernetes_version(release)}: {names} in "


def test_releases_span_the_supported_range() -> None:
    """The oldest is 1.34, the first release with resource.k8s.io/v1 (which gpu2dra needs);
    each go.mod pins a patch of its own release."""
    assert OLDEST == "v1.34" and NEWEST != OLDEST, RELEASES
    for release in RELEASES:
        assert kubernetes_version(release).startswith(f"{release}.")


def test_build_is_a_timed_no_op_until_the_toolchain_changes(tmp_path: Path) -> None:
    out, calls = run_build(tmp_path, "go1.99.0")
    for release in RELEASES:
        assert built(release) in out, out
        assert (tmp_path / "bin" / release / "kube-apiserver").exists()
        assert f"gitVersion={kubernetes_version(release)} " in calls
    assert re.search(rf"^built helm {TIME}$", out, re.M), out
    assert re.search(
        rf"^control plane binaries for {' '.join(RELEASES)} ready in .* {TIME}$", out, re.M
    ), out
    assert "build -mod=readonly" in calls
    # helm assumes the newest release, as `helm template` without a cluster
    (helm,) = [c for c in calls.splitlines() if c.startswith("install ") and "helm/v3" in c]
    assert f"k8sVersionMinor={NEWEST.split('.')[1]} " in helm
    # Helm 4 beside it, as helm4 (its post-renderers are plugins)
    (helm4,) = [c for c in calls.splitlines() if c.startswith("install ") and "helm/v4" in c]
    assert "helm.sh/helm/v4/cmd/helm@v4." in helm4
    assert re.search(rf"^built helm4 {TIME}$", out, re.M), out
    assert (tmp_path / "bin" / "helm4").exists()

    again, calls = run_build(tmp_path, "go1.99.0")
    current = [
        rf"Kubernetes {r} binaries are current in {tmp_path}/bin/{r}"
        rf" \(go version go1\.99\.0 linux/amd64; checked {TIME}\)"
        for r in RELEASES
    ]
    current += [
        rf"helm v\d+\.\d+\.\d+ is current in {tmp_path}/bin \(checked {TIME}\)",
        rf"helm4 v4\.\d+\.\d+ is current in {tmp_path}/bin \(checked {TIME}\)",
        rf"control plane binaries for {' '.join(RELEASES)} ready in {tmp_path}/bin {TIME}",
    ]
    assert re.fullmatch("".join(line + "\n" for line in current), again), again
    assert calls == "version\n", "a no-op builds nothing"

    upgraded, calls = run_build(tmp_path, "go1.99.1")
    assert all(built(r) in upgraded for r in RELEASES) and "built helm" in upgraded
    assert "built helm4" in upgraded
    assert "build -mod=readonly" in calls


def test_build_is_redone_when_a_binary_is_missing(tmp_path: Path) -> None:
    run_build(tmp_path, "go1.99.0")
    (tmp_path / "bin" / OLDEST / "kubectl").unlink()
    rebuilt, calls = run_build(tmp_path, "go1.99.0")
    assert (tmp_path / "bin" / OLDEST / "kubectl").exists() and built(OLDEST) in rebuilt
    assert f"Kubernetes {NEWEST} binaries are current" in rebuilt
    assert kubernetes_version(NEWEST) not in calls


def test_a_release_builds_the_tools_of_its_go_mod(tmp_path: Path) -> None:
    """Only the release named is built; a `tool` line added to its go.mod is built into its
    directory (as kubelet will be) and rebuilds that release alone."""
    out, _ = run_build(tmp_path, "go1.99.0", OLDEST)
    assert built(OLDEST) in out and "built helm" in out
    assert not (tmp_path / "bin" / NEWEST).exists()

    run_build(tmp_path, "go1.99.0")
    go_mod = tmp_path / "k8s" / NEWEST / "go.mod"
    go_mod.write_text(go_mod.read_text() + "\ntool k8s.io/kubernetes/cmd/kubelet\n")
    out, calls = run_build(tmp_path, "go1.99.0")
    assert f"Kubernetes {OLDEST} binaries are current" in out
    assert f"built Kubernetes {kubernetes_version(NEWEST)}: etcd " in out
    assert (tmp_path / "bin" / NEWEST / "kubelet").exists()
    assert not (tmp_path / "bin" / OLDEST / "kubelet").exists()
    assert "k8s.io/kubernetes/cmd/kubelet" in calls


@pytest.mark.parametrize(
    ("missing", "go", "ci", "expected"),
    [
        ([], False, True, None),
        (["helm"], False, False, "skip"),
        (["helm"], False, True, "fail"),
        (["kubectl"], True, False, "fail"),
        (["etcd", "kube-apiserver"], True, True, "fail"),
    ],
)
def test_e2e_skip_only_without_go_outside_ci(
    missing: list[str], go: bool, ci: bool, expected: str | None
) -> None:
    verdict = missing_tools(Path("/b"), missing, go=go, ci=ci)
    assert (verdict and verdict[0]) == expected
    if verdict:
        message = verdict[1]
        assert "\n" not in message and f"{', '.join(missing)} missing in /b" in message
        assert ("run `bash tests/k8s/build.sh`" in message) == go
        assert ("Go is not installed" in message) == (not go)


def test_failure_copies_control_plane_webhook_and_node_logs(tmp_path: Path) -> None:
    plane_logs = tmp_path / "plane"
    plane_logs.mkdir()
    (plane_logs / "kube-apiserver.log").write_text("apiserver")
    webhook_log = tmp_path / "gpu2dra0" / "webhook.log"
    webhook_log.parent.mkdir()
    webhook_log.write_text('{"message": "translated"}')
    node_logs = tmp_path / "node" / "logs"
    (node_logs).mkdir(parents=True)
    (node_logs / "kubelet.log").write_text("kubelet")
    dest = tmp_path / "logs"
    (dest / "test_x-e2e-1").mkdir(parents=True)
    (dest / "test_x-e2e-1" / "namespace.yaml").write_text("a failed test's namespace")

    assert copy_logs(plane_logs, {"test_webhook": webhook_log}, dest)
    copy_node_logs(node_logs, dest / "node-test_node")
    copy_node_logs(tmp_path / "no-pod-logs", dest / "node-test_node" / "pods")
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*.*")) == [
        "kube-apiserver.log",
        "node-test_node/kubelet.log",
        "test_x-e2e-1/namespace.yaml",
        "webhook-test_webhook.log",
    ]
    assert (dest / "webhook-test_webhook.log").read_text() == '{"message": "translated"}'
    assert not copy_logs(tmp_path / "absent", {}, dest)
