"""`gpu2dra capacity`: the GPU demand of enabled and audit namespaces against free DRA devices,
the device plugin's capacity left and the node autoscalers, over clusters as plain dicts."""

from __future__ import annotations

from typing import Any

import orjson
from kubernetes.client import ApiClient

from app.cli import arguments, commands
from app.core.catalog import Catalog
from app.core.policy import load_policy, parse_policy
from app.plan.capacity.analyse import Inputs, analyse, planned
from app.plan.capacity.gather import gather
from app.plan.capacity.render import render_json, render_text
from app.readers.client import NotFound, Reader, ReadError
from app.readers.demand import Known, pod_ask

Obj = dict[str, Any]
POLICY = parse_policy({})
A100 = "NVIDIA A100-SXM4-80GB"
ON_A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}


def device_class(name: str, kind: str) -> Obj:
    expression = (
        f"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{kind}'"
    )
    return {
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


CLASSES = [device_class("gpu.nvidia.com", "gpu"), device_class("mig.nvidia.com", "mig")]


def device(name: str, product: str = A100, profile: str = "", **extra: Any) -> Obj:
    attributes = {
        "type": {"string": "mig" if profile else "gpu"},
        "productName": {"string": product},
    }
    if profile:
        attributes["profile"] = {"string": profile}
    return {"name": name, "attributes": attributes, **extra}


def resource_slice(node: str, *devices: Obj) -> Obj:
    return {
        "metadata": {"name": f"{node}-gpu.nvidia.com"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": list(devices),
        },
    }


def allocated(namespace: str, name: str, *devices: tuple[str, str], spec: Obj | None = None) -> Obj:
    results = [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": dev}
        for pool, dev in devices
    ]
    claim: Obj = {"metadata": {"namespace": namespace, "name": name}, "spec": spec or {}}
    claim["status"] = {"allocation": {"devices": {"results": results}}} if results else {}
    return claim


def namespace(name: str, mode: str | None = None) -> Obj:
    return {"metadata": {"name": name, "labels": {"gpu2dra.io/migration": mode} if mode else {}}}


def owned_by(kind: str, name: str) -> list[Obj]:
    return [{"kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}]


def pod(ns: str, name: str, resources: Obj, *, node: str = "", owner: str = "", **spec: Any) -> Obj:
    body: Obj = {
        "containers": [{"name": "main", "resources": {"limits": resources}}],
        **({"nodeName": node} if node else {}),
        **spec,
    }
    meta: Obj = {"namespace": ns, "name": name, "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = owned_by("ReplicaSet", owner)
    return {"metadata": meta, "spec": body, "status": {"phase": "Running" if node else "Pending"}}


def deployment(ns: str, name: str, replicas: int, resources: Obj, **spec: Any) -> Obj:
    template = {"containers": [{"name": "main", "resources": {"limits": resources}}], **spec}
    return {
        "metadata": {"namespace": ns, "name": name, "uid": f"uid-{name}"},
        "spec": {"replicas": replicas, "template": {"spec": template}},
    }


def replica_set(ns: str, name: str, deployment: str) -> Obj:
    meta = {"namespace": ns, "name": name, "uid": f"uid-{name}"}
    return {"metadata": {**meta, "ownerReferences": owned_by("Deployment", deployment)}}


def node(name: str, gpus: int) -> Obj:
    return {"metadata": {"name": name}, "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}}}


def karpenter() -> Obj:
    labels = {"app.kubernetes.io/name": "karpenter"}
    container = {"name": "controller", "image": "public.ecr.aws/karpenter/controller:1.8.1"}
    return {
        "metadata": {"namespace": "kube-system", "name": "karpenter", "labels": labels},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def inputs(**given: Any) -> Inputs:
    base: dict[str, Any] = {
        "namespaces": [],
        "device_classes": CLASSES,
        "slices": [],
        "claims": [],
        "templates": [],
        "nodes": [],
        "pods": [],
    }
    return Inputs(**{**base, **given})


def team_a_cluster() -> Inputs:
    """team-a (audit): a Deployment of 4 replicas of 2 A100s each, one pod bound to the
    device-plugin node and one pending, and a pod that can preempt; team-b (enabled): a bare
    pod of one GPU. Three A100s and an H100 are published, one A100 allocated elsewhere."""
    gpus = {"nvidia.com/gpu": 2}
    return inputs(
        namespaces=[namespace("team-a", "audit"), namespace("team-b", "enabled"), namespace("x")],
        slices=[
            resource_slice("n1", device("gpu-0"), device("gpu-1"), device("gpu-2")),
            resource_slice("n2", device("gpu-0", "NVIDIA H100 80GB HBM3")),
        ],
        claims=[allocated("x", "held", ("n1", "gpu-1"))],
        nodes=[node("p1", 8)],
        pods=[
            # as the Deployment's ReplicaSet makes them, with its node selector
            pod("team-a", "train-1-a", gpus, node="p1", owner="train-1", nodeSelector=ON_A100),
            pod("team-a", "train-1-b", gpus, owner="train-1", nodeSelector=ON_A100),
            pod("team-a", "urgent", {"nvidia.com/gpu": 1}, node="p1", priorityClassName="high"),
            pod("team-b", "solo", {"nvidia.com/gpu": 1}),
            pod("x", "other", {"nvidia.com/gpu": 3}, node="p1"),
        ],
        workloads={
            "Deployment": [
                deployment("team-a", "train", 4, {"nvidia.com/gpu": 2}, nodeSelector=ON_A100),
                karpenter(),
            ],
            "ReplicaSet": [replica_set("team-a", "train-1", "train")],
        },
    )


def test_demand_against_free_devices_the_device_plugin_and_autoscalers_as_text() -> None:
    said = render_text(analyse(team_a_cluster(), POLICY))
    assert said == (
        "GPU demand of the namespaces gpu2dra translates or audits (enabled, audit):\n"
        "NAMESPACE  MODE     RUNNING  PENDING  REPLICAS  HELD  NEEDS  FREE  SHAPE\n"
        "team-a     audit    2        2        8         0     8      2     "
        "gpu.nvidia.com devices of product NVIDIA-A100-SXM4-80GB\n"
        "team-b     enabled  0        1        0         0     1      3     "
        "gpu.nvidia.com devices\n"
        "  team-a: pods gpu2dra leaves on the device plugin: preempting 1\n"
        "  team-a: its bound pods free 2 nvidia.com/gpu on the device plugin as they move\n"
        "\n"
        "DRA devices published (ResourceSlices) of the classes gpu2dra maps:\n"
        "CLASS           PRODUCT                PROFILE  SHARED  PUBLISHED  FREE  SHARES FREE\n"
        "gpu.nvidia.com  NVIDIA-A100-SXM4-80GB  -        no      3          2     -\n"
        "gpu.nvidia.com  NVIDIA-H100-80GB-HBM3  -        no      1          1     -\n"
        "\n"
        "device plugin (nodes' allocatable, less what bound pods request):\n"
        "RESOURCE        NODES  ALLOCATABLE  REQUESTED  LEFT\n"
        "nvidia.com/gpu  1      8            6          2\n"
        "\n"
        "node autoscalers:\n"
        "  Karpenter v1.8.1 (kube-system/karpenter): cannot add DRA nodes: --ignore-dra-requests "
        "is true (its default): it skips pods with claims (setting it false is not enough: the "
        "cloud provider must also predict gpu.nvidia.com devices for its instance types, which "
        "the AWS, Azure and kwok providers do not)\n"
        "\n"
        "what it means:\n"
        "  enabling team-a needs 6 more gpu.nvidia.com devices of product NVIDIA-A100-SXM4-80GB "
        "(8 needed, 2 free)\n"
        "  team-b (enabled) fits: 1 needed of gpu.nvidia.com devices, 3 free\n"
        "  no node autoscaler found can add DRA nodes: add nodes that run the DRA driver "
        "(gpu.nvidia.com) before enabling, or gpu2dra leaves pods whose classes have no device "
        "on the device plugin (policy noDraCapacity)\n"
    )


def template(ns: str, name: str, device_class: str, count: int = 1, **exactly: Any) -> Obj:
    request = {"deviceClassName": device_class, "count": count, **exactly}
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}
    return {"metadata": {"namespace": ns, "name": name}, "spec": {"spec": spec}}


def translated_pod(ns: str, name: str, claim: str, *, node: str = "", owner: str = "") -> Obj:
    """A pod as gpu2dra translated it: a claim from template t; `claim`, the one made for it."""
    made = pod(ns, name, {}, node=node, owner=owner)
    made["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    made["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    if claim:
        made["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    return made


def test_an_enabled_namespace_counts_what_its_translated_pods_hold_as_json() -> None:
    """ml (enabled): a Deployment of 3 replicas of one MIG 1g.10gb slice; two pods translated
    and bound (their claims allocated), one not yet made. It needs one more slice, and one of
    the two published is free."""
    mig = {"nvidia.com/mig-1g.10gb": 1}
    profile = {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}
    written = template("ml", "t", "mig.nvidia.com", selectors=[profile])  # as gpu2dra wrote it
    spec = written["spec"]["spec"]
    cluster = inputs(
        namespaces=[namespace("ml", "enabled")],
        slices=[resource_slice("n1", *(device(f"mig-{i}", profile="1g.10gb") for i in range(3)))],
        claims=[allocated("ml", f"c{i}", ("n1", f"mig-{i}"), spec=spec) for i in range(2)],
        templates=[written],
        pods=[
            translated_pod("ml", f"infer-1-{i}", f"c{i}", node="n1", owner="infer-1")
            for i in range(2)
        ],
        workloads={
            "Deployment": [deployment("ml", "infer", 3, mig)],
            "ReplicaSet": [replica_set("ml", "infer-1", "infer")],
        },
    )
    body = orjson.loads(render_json(analyse(cluster, POLICY)))
    assert body["namespaces"] == [
        {
            "name": "ml",
            "mode": "enabled",
            "needs": [
                {
                    "shape": "mig.nvidia.com devices of MIG profile 1g.10gb",
                    "device_class": "mig.nvidia.com",
                    "product": "",
                    "profile": "1g.10gb",
                    "capacity": {},
                    "selectors": ["device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"],
                    "running": 2,
                    "pending": 0,
                    "replicas": 3,
                    "held": 2,
                    "needs": 1,
                    "free": 1,
                    "short": 0,
                }
            ],
            "staying": {},
            "frees": {},
        }
    ]
    assert body["pools"] == [
        {
            "device_class": "mig.nvidia.com",
            "product": "NVIDIA-A100-SXM4-80GB",
            "profile": "1g.10gb",
            "shared": False,
            "published": 3,
            "free": 1,
            "shares": 0,
            "shares_free": 0,
        }
    ]
    assert (body["plugin"], body["autoscalers"], body["unreadable"]) == ([], [], [])
    assert body["sentences"] == [
        "ml (enabled) fits: 1 needed of mig.nvidia.com devices of MIG profile 1g.10gb, 1 free"
    ]


def test_shared_devices_count_the_shares_left() -> None:
    """A pod translated onto shared GPUs asks shares 1 of a device; two devices publish 4
    shares each, and claims took 3 of one: 5 more such requests fit."""
    shares = {"value": "4", "requestPolicy": {"default": "1"}}
    shared = [
        device(f"gpu-{i}", allowMultipleAllocations=True, capacity={"shares": shares})
        for i in range(2)
    ]
    taking: Obj = {"capacity": {"requests": {"shares": "1"}}}
    held = allocated("x", "c", ("n1", "gpu-0"))
    held["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] = {"shares": "3"}
    cluster = inputs(
        namespaces=[namespace("ml", "audit")],
        slices=[resource_slice("n1", *shared)],
        claims=[held],
        templates=[template("ml", "t", "gpu.nvidia.com", **taking)],
        pods=[translated_pod("ml", "p", "")],
    )
    report = analyse(cluster, POLICY)
    (need,) = report.namespaces[0].needs
    assert (need.shape, need.pending, need.needs, need.free) == (
        "gpu.nvidia.com devices, taking shares 1 of each",
        1,
        1,
        5,
    )
    (pool,) = report.pools
    assert (pool.shared, pool.published, pool.free, pool.shares, pool.shares_free) == (
        True,
        2,
        1,
        8,
        5,
    )


def test_namespaces_that_fit_alone_but_not_together() -> None:
    cluster = inputs(
        namespaces=[namespace("a", "enabled"), namespace("b", "audit")],
        slices=[resource_slice("n1", device("gpu-0"), device("gpu-1"))],
        pods=[pod("a", "p", {"nvidia.com/gpu": 2}), pod("b", "q", {"nvidia.com/gpu": 1})],
        workloads={"Deployment": [karpenter() | {"metadata": {"name": "k"}}]},
    )
    assert analyse(cluster, POLICY).sentences == [
        "a (enabled) fits: 2 needed of gpu.nvidia.com devices, 2 free",
        "enabling b fits: 1 needed of gpu.nvidia.com devices, 2 free",
        "together, a, b need 1 more gpu.nvidia.com devices (3 needed, 2 free)",
    ]


def test_nothing_planned_and_what_cannot_be_read() -> None:
    forbidden = ReadError("GET /apis/resource.k8s.io/v1/resourceclaims: 403 forbidden")
    cluster = inputs(
        namespaces=[namespace("ml", "enabled")],
        claims=forbidden,
        pods=[pod("ml", "p", {"nvidia.com/gpu": 1})],
    )
    report = analyse(cluster, POLICY)
    assert report.sentences == [
        "ml (enabled) needs 1 gpu.nvidia.com devices; what is free could not be read"
    ]
    assert report.unreadable == [f"cannot read resourceclaims: {forbidden}"]
    assert report.pools == []
    said = render_text(analyse(inputs(namespaces=[namespace("ml")]), POLICY))
    assert said.startswith(
        "GPU demand of the namespaces gpu2dra translates or audits (enabled, audit):\n"
        "  no namespace is enabled or in audit\n"
    )


class FakeReader(Reader):
    """Answers GETs from a table of paths; a path not in it is a 404."""

    def __init__(self, answers: dict[str, list[Obj] | ReadError]) -> None:
        super().__init__(ApiClient())
        self.answers = answers

    def get(self, path: str, **query: str) -> Obj:
        answer = self.answers.get(path)
        if answer is None:
            raise NotFound(f"GET {path}: not found")
        if isinstance(answer, ReadError):
            raise answer
        return {"items": answer, "metadata": {}}


def test_gather_reads_every_namespace_and_names_what_it_cannot() -> None:
    forbidden = ReadError("403 forbidden")
    got = gather(
        FakeReader(
            {
                "/api/v1/namespaces": [namespace("ml", "enabled")],
                "/apis/resource.k8s.io/v1/deviceclasses": CLASSES,
                "/api/v1/pods": forbidden,
                "/apis/batch/v1/jobs": [],
            }
        )
    )
    assert got.namespaces == [namespace("ml", "enabled")]
    assert got.device_classes == CLASSES
    assert got.pods is forbidden
    assert got.workloads["Job"] == []
    assert isinstance(got.workloads["Deployment"], NotFound)


def test_the_command_parses_its_output() -> None:
    args = arguments.parser().parse_args(["capacity", "-o", "json"])
    assert (args.output, args.policy, args.kubeconfig) == ("json", None, None)
    assert "capacity" in commands.COMMANDS


def test_pods_and_namespaces_being_deleted_ask_nothing() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ml", "deletionTimestamp": "2026-12-04T20:00:00Z"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
    }
    known = Known.of(load_policy(None), Catalog.of(["gpu.nvidia.com"]), claims=[], owners=[])
    assert pod_ask(pod, known) is None
    live = {**pod, "metadata": {"name": "p", "namespace": "ml"}}
    assert pod_ask(live, known) is not None
    label = {"gpu2dra.io/migration": "enabled"}
    gone = {"metadata": {"name": "old", "labels": label}, "status": {"phase": "Terminating"}}
    here = {"metadata": {"name": "ml", "labels": label}, "status": {"phase": "Active"}}
    assert planned([gone, here], load_policy(None)) == {"ml": "enabled"}


def test_wide_adds_what_each_need_lacks_and_its_class_and_no_headers_drops_the_headers() -> None:
    report = analyse(team_a_cluster(), POLICY)
    wide = render_text(report, wide=True).splitlines()
    assert wide[1].split() == [
        *("NAMESPACE", "MODE", "RUNNING", "PENDING", "REPLICAS", "HELD", "NEEDS", "FREE"),
        *("SHORT", "CLASS", "SHAPE"),
    ]
    assert wide[2].split()[:10] == [
        *("team-a", "audit", "2", "2", "8", "0", "8", "2", "6", "gpu.nvidia.com")
    ]
    bare = render_text(report, headers=False).splitlines()
    plain = render_text(report).splitlines()
    headers = {line for line in plain if line.startswith(("NAMESPACE ", "CLASS ", "RESOURCE "))}
    assert len(headers) == 3 and bare == [line for line in plain if line not in headers]
