"""The ExtendedResourceToleration admission plugin on a real API server (KEP-less, in-tree since
1.9; on in GKE and elsewhere): it adds `{key: nvidia.com/gpu, operator: Exists, effect:
NoSchedule}` to pods that request the extended resource, so GPU nodes tainted
`nvidia.com/gpu:NoSchedule` take pods that tolerate nothing themselves.

At admission it runs before mutating webhooks, so the pod gpu2dra translates already carries
it, and gpu2dra adds none. Offline, `gpu2dra translate` adds what the plugin would have, so the
translated manifest applied later stores the same tolerations and still lands on tainted GPU
nodes. The session's control plane runs without the plugin: this module starts its own.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.support.cluster import (
    create_gpu_node,
    create_namespace,
    delete_namespace,
    gpu_pod,
    read_pod,
    wait_for,
    wait_for_default_service_account,
    wait_for_pod_scheduled,
)
from tests.support.controlplane import REPO_ROOT, ControlPlane, find_bin_dir
from tests.support.failure_logs import copy_logs, failure_dir
from tests.support.webhook import WEBHOOK_LOG, Webhook, running_webhook

pytestmark = pytest.mark.every_release

Obj = dict[str, Any]

PLUGIN = "--enable-admission-plugins=ExtendedResourceToleration"
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


class Plane:
    """A control plane with the plugin on, its admin client and a registered gpu2dra."""

    def __init__(self, plane: ControlPlane, api: client.ApiClient, hook: Webhook) -> None:
        self.plane, self.api, self.hook = plane, api, hook
        self.namespaces: list[str] = []

    def namespace(self, mode: str | None = None) -> str:
        name = create_namespace(self.api, "tolerations-")
        self.namespaces.append(name)
        wait_for_default_service_account(self.api, name)
        if mode is not None:
            self.hook.set_mode(self.api, name, mode)
        return name

    def forget(self) -> None:
        """Delete the namespaces a test made, their pods at once: a pod left Pending would
        take the GPU of the next test's node."""
        while self.namespaces:
            delete_namespace(self.api, self.namespaces.pop())


@pytest.fixture(scope="module")
def with_plugin(
    request: pytest.FixtureRequest, release: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Plane]:
    work = tmp_path_factory.mktemp(f"plugin-plane-{release}")
    plane = ControlPlane(find_bin_dir() / release, work / "plane", apiserver_args=[PLUGIN])
    failed_before = request.session.testsfailed
    try:
        with plane:
            api = plane.api_client()
            try:
                for hook in running_webhook(plane, api, work / "gpu2dra"):
                    yield Plane(plane, api, hook)
            finally:
                api.close()
    finally:
        if request.session.testsfailed > failed_before:  # its logs, as the shared plane's
            dest = failure_dir(request.config, release, "plane-with-ExtendedResourceToleration")
            copy_logs(plane.log_dir, {"test_tolerations": work / "gpu2dra" / WEBHOOK_LOG}, dest)


@pytest.fixture(autouse=True)
def _forget_namespaces(with_plugin: Plane) -> Iterator[None]:
    yield
    with_plugin.forget()


def translated_offline(pod: Obj, namespace: str) -> tuple[list[Obj], list[str]]:
    """`gpu2dra translate` of `pod`: the documents (its templates, then the pod) and warnings."""
    done = subprocess.run(
        [sys.executable, "-m", "app", "translate", "-f", "-", "-n", namespace, "-o", "json"],
        input=json.dumps(pod),
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )
    body = json.loads(done.stdout)
    assert (body["apiVersion"], body["kind"]) == ("v1", "List")
    warnings = [line.removeprefix("warning: ") for line in done.stderr.splitlines()]
    return body["items"], warnings


def create_all(plane: ControlPlane, namespace: str, docs: list[Obj]) -> Obj:
    """`kubectl create` of `docs` in their order, into `namespace`: the templates translate
    writes first, then the pod; the pod as stored."""
    *templates, pod = docs
    for template in templates:
        plane.kubectl("create", "-n", namespace, "-f", "-", stdin=template)
    return plane.create(namespace, pod)[0]


def same(a: list[Obj], b: list[Obj]) -> bool:
    """Whether two lists of tolerations hold the same ones, in any order."""
    return sorted(json.dumps(t, sort_keys=True) for t in a) == sorted(
        json.dumps(t, sort_keys=True) for t in b
    )


def gpu_tolerations(pod: Obj) -> list[Obj]:
    return [t for t in pod["spec"].get("tolerations", []) if t.get("key") == "nvidia.com/gpu"]


def test_the_plugin_runs_before_gpu2dra_which_adds_none(with_plugin: Plane) -> None:
    namespace = with_plugin.namespace("enabled")
    pod = gpu_pod("p", {"nvidia.com/gpu": 1})
    # gpu2dra's own answer to the pod as written: claims, and no toleration of its own.
    answer = with_plugin.hook.dry_run(namespace, pod)
    ops = json.loads(base64.b64decode(answer["patch"]))
    assert any(op["path"] == "/spec/resourceClaims" for op in ops)
    assert not [op for op in ops if op["path"].startswith("/spec/tolerations")], ops

    stored, _ = with_plugin.plane.create(namespace, pod)
    assert stored["spec"]["resourceClaims"], "translated"
    assert "nvidia.com/gpu" not in json.dumps(stored["spec"]["containers"])
    # The plugin saw nvidia.com/gpu before gpu2dra replaced it.
    assert gpu_tolerations(stored) == [GPU]


@pytest.mark.parametrize(
    "own",
    [[], [{"operator": "Exists"}]],
    ids=["none", "tolerates-everything"],
)
def test_an_offline_translation_stores_what_the_plugin_gives_the_pod(
    with_plugin: Plane, own: list[Obj]
) -> None:
    untouched = with_plugin.namespace()  # gpu2dra leaves every pod here as it is
    pod = gpu_pod("p", {"nvidia.com/gpu": 1}, tolerations=own)
    # What the API server stores for the pod as written: the plugin appends its toleration,
    # even beside one that tolerates every taint (it matches key, operator, effect, value).
    original, _ = with_plugin.plane.create(untouched, pod)
    assert original["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert gpu_tolerations(original) == [GPU]

    docs, warnings = translated_offline({**pod, "metadata": {"name": "q"}}, untouched)
    assert [d["kind"] for d in docs] == ["ResourceClaimTemplate", "Pod"]
    assert [w.split(": ", 1)[1].split(" (")[0] for w in warnings] == ["toleration nvidia.com/gpu"]
    stored = create_all(with_plugin.plane, untouched, docs)
    assert stored["spec"]["resourceClaims"]
    assert "nvidia.com/gpu" not in json.dumps(stored["spec"]["containers"])
    # The plugin had nothing to add (no extended resource): the toleration is gpu2dra's, and
    # the pod holds the same tolerations as the one applied untranslated (DefaultToleration-
    # Seconds, before the plugin, appends its own: the order differs, not the tolerations).
    assert gpu_tolerations(stored) == [GPU]
    assert same(stored["spec"]["tolerations"], original["spec"]["tolerations"])


def test_the_toleration_lets_the_translated_pod_onto_a_tainted_gpu_node(
    with_plugin: Plane,
) -> None:
    api = with_plugin.api
    node, _ = create_gpu_node(api, "tainted-gpu", gpus=2)
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    client.CoreV1Api(api).patch_node(node["metadata"]["name"], {"spec": {"taints": [taint]}})
    namespace = with_plugin.namespace()
    docs, _ = translated_offline(gpu_pod("with", {"nvidia.com/gpu": 1}), namespace)
    create_all(with_plugin.plane, namespace, docs)
    assert wait_for_pod_scheduled(api, namespace, "with")["spec"]["nodeName"] == "tainted-gpu"

    # The same translated pod without the toleration: its claim could be allocated on the
    # node's second GPU, but the taint keeps it off.
    bare = {**docs[-1], "metadata": {"name": "without"}}
    bare["spec"] = {k: v for k, v in docs[-1]["spec"].items() if k != "tolerations"}
    with_plugin.plane.create(namespace, bare)

    def refused() -> str | None:
        pod = read_pod(api, namespace, "without")
        assert not pod["spec"].get("nodeName"), "scheduled onto the tainted node"
        for condition in pod.get("status", {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return str(condition.get("message"))
        return None

    message = wait_for(refused, 60, "the scheduler to refuse the pod without the toleration")
    assert "1 node(s) had untolerated taint" in message, message  # the node's only taint
    assert read_pod(api, namespace, "without")["status"]["phase"] == "Pending"
