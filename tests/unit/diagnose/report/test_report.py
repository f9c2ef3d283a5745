"""The report's pure part: workloads found at the top controller, GPU counts, rollout order
and the three output formats."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from typing import Any

from app.core.catalog import Catalog
from app.core.outcomes import Code
from app.core.policy import load_policy
from app.core.resources import legacy_devices
from app.core.translate import translate
from app.diagnose.report.render import render_csv, render_json, render_table
from app.diagnose.report.report import build

Obj = dict[str, Any]
POLICY = load_policy(None)
CATALOG = Catalog.of(["gpu.nvidia.com", "mig.nvidia.com"])


def container(name: str, limits: Obj, **extra: Any) -> Obj:
    return {"name": name, "image": "x", "resources": {"limits": limits}, **extra}


def obj(kind: str, name: str, ns: str, spec: Obj, *, owner: Obj | None = None) -> tuple[str, Obj]:
    meta: Obj = {"name": name, "namespace": ns, "uid": f"uid-{kind}-{name}"}
    if owner is not None:
        meta["ownerReferences"] = [{**owner, "controller": True}]
    return kind, {"kind": kind, "metadata": meta, "spec": spec}


def namespace(name: str, mode: str | None = None) -> Obj:
    labels = {"gpu2dra.io/migration": mode} if mode else {}
    return {"metadata": {"name": name, "labels": labels}}


def pod_spec(*containers: Obj, init: list[Obj] | None = None) -> Obj:
    return {"containers": list(containers), **({"initContainers": init} if init else {})}


def test_gpus_per_pod_count_init_containers_as_the_device_plugin_does() -> None:
    spec = pod_spec(
        container("a", {"nvidia.com/gpu": "2"}),
        container("b", {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.5gb": 1}),
        init=[container("warm", {"nvidia.com/gpu": 4}), container("c", {"cpu": "1"})],
    )
    assert legacy_devices(spec, POLICY) == {"nvidia.com/gpu": 4, "nvidia.com/mig-1g.5gb": 1}
    assert legacy_devices(pod_spec(container("a", {"cpu": "1"})), POLICY) == {}


def test_workloads_are_reported_at_the_top() -> None:
    template = {"template": {"spec": pod_spec(container("main", {"nvidia.com/gpu": 1}))}}
    deploy_ref = {"kind": "Deployment", "name": "web", "uid": "uid-Deployment-web"}
    rs_ref = {"kind": "ReplicaSet", "name": "web-1", "uid": "uid-ReplicaSet-web-1"}
    ray_ref = {"kind": "RayCluster", "name": "ray", "uid": "uid-ray"}
    objects = [
        obj("Deployment", "web", "ml", {"replicas": 3, **template}),
        obj("ReplicaSet", "web-1", "ml", template, owner=deploy_ref),
        obj("Pod", "web-1-a", "ml", template["template"]["spec"], owner=rs_ref),
        # Owned by a custom resource that could not be listed: reported as its owner, once.
        obj("Pod", "ray-head", "ml", template["template"]["spec"], owner=ray_ref),
        obj("Pod", "ray-worker", "ml", template["template"]["spec"], owner=ray_ref),
        obj("Pod", "cpu", "ml", pod_spec(container("c", {"cpu": "1"}))),
    ]
    report = build([namespace("ml")], objects, POLICY, CATALOG)
    (ns,) = report.namespaces
    assert [(w.kind, w.name, w.replicas, w.seen_through) for w in ns.workloads] == [
        ("Deployment", "web", 3, ""),
        ("RayCluster", "ray", None, "Pod ray-head"),
    ]
    assert ns.workloads[0].templates[0].endswith(": 1 x gpu.nvidia.com")


def test_rollout_order_clean_namespaces_first() -> None:
    clean = obj("Pod", "p", "clean", pod_spec(container("c", {"nvidia.com/gpu": 8})))
    noisy = obj(
        "Pod",
        "p",
        "noisy",
        pod_spec(container("c", {"nvidia.com/gpu": 1}, env=[{"name": "NVIDIA_VISIBLE_DEVICES"}])),
    )
    small = obj("Pod", "p", "small", pod_spec(container("c", {"nvidia.com/gpu": 1})))
    done = obj("Pod", "p", "done", pod_spec(container("c", {"nvidia.com/gpu": 1})))
    system = obj("Pod", "p", "kube-system", pod_spec(container("c", {"nvidia.com/gpu": 1})))
    report = build(
        [
            namespace("clean"),
            namespace("noisy", "audit"),
            namespace("small"),
            namespace("done", "enabled"),
            namespace("kube-system"),
        ],
        [clean, noisy, small, done, system],
        POLICY,
        CATALOG,
    )
    assert report.rollout == ["small", "clean", "noisy"]
    modes = {n.name: n.mode for n in report.namespaces}
    assert modes == {
        "clean": "disabled",
        "done": "enabled",
        "kube-system": "never changed",
        "noisy": "audit",
        "small": "disabled",
    }
    (noisy_ns,) = [n for n in report.namespaces if n.name == "noisy"]
    assert noisy_ns.workloads[0].warnings == [
        "container 'c' sets or reads NVIDIA_VISIBLE_DEVICES; under DRA it is `void` and devices "
        "come through CDI"
    ]
    assert noisy_ns.workloads[0].codes == [Code.VISIBLE_DEVICES]


def test_missing_device_class_is_a_warning() -> None:
    mig = obj("Pod", "p", "ml", pod_spec(container("c", {"nvidia.com/mig-1g.5gb": 1})))
    report = build([namespace("ml")], [mig], POLICY, Catalog.of(["gpu.nvidia.com"]))
    (workload,) = report.namespaces[0].workloads
    assert workload.templates == []
    assert workload.warnings[0].startswith("DeviceClass mig.nvidia.com does not exist")
    assert workload.codes == [Code.NO_DEVICE_CLASS]


def test_outputs() -> None:
    spec = {"replicas": 2, "template": {"spec": pod_spec(container("c", {"nvidia.com/gpu": 2}))}}
    report = build(
        [namespace("ml")],
        [obj("Deployment", "web", "ml", spec)],
        POLICY,
        CATALOG,
        unreadable=["trainjobs (GET ...: 403 forbidden)"],
    )
    table = render_table(report).splitlines()
    assert table[0].split() == [
        *("NAMESPACE", "MODE", "WORKLOAD", "GPUS", "PER", "POD", "SERVED", "BY", "PREEMPTS"),
        *("NODE", "WARNINGS"),
    ]
    assert table[1].split() == [
        *("ml", "disabled", "Deployment/web", "nvidia.com/gpu=2", "x2", "device", "plugin", "-"),
        *("-", "0"),
    ]
    assert table[2].startswith("    would create gpu2dra-gpu-x2-")
    assert "  1. ml (disabled, 1 workload(s), no warnings): kubectl label namespace ml" in (
        "\n".join(table)
    )
    assert table[-1] == "cannot read trainjobs (GET ...: 403 forbidden)"

    (row,) = csv.DictReader(io.StringIO(render_csv(report)))
    assert (row["namespace"], row["kind"], row["replicas"], row["gpus"]) == (
        "ml",
        "Deployment",
        "2",
        "nvidia.com/gpu=2",
    )
    body = json.loads(render_json(report))
    assert body["rollout"] == ["ml"]
    assert body["namespaces"][0]["workloads"][0]["gpus"] == {"nvidia.com/gpu": 2}


def test_workloads_whose_pods_can_preempt_are_named() -> None:
    def deployment(name: str, **priority: str) -> tuple[str, Obj]:
        pod = {**pod_spec(container("c", {"nvidia.com/gpu": 1})), **priority}
        return obj("Deployment", name, "ml", {"replicas": 1, "template": {"spec": pod}})

    objects = [
        deployment("high", priorityClassName="high"),
        deployment("batch", priorityClassName="batch", preemptionPolicy="Never"),
        deployment("plain"),
    ]
    report = build([namespace("ml", "enabled")], objects, POLICY, CATALOG)
    rows = {w.name: (w.preempts, w.path) for w in report.namespaces[0].workloads}
    assert rows == {
        "high": ("high", "device plugin"),  # left where it still preempts
        "batch": ("", "gpu2dra"),
        "plain": ("", "gpu2dra"),
    }
    (high,) = [w for w in report.namespaces[0].workloads if w.name == "high"]
    assert any(m.startswith("priorityClassName high can preempt") for m in high.warnings)
    assert high.codes == [Code.PREEMPTING]
    lines = render_csv(report).splitlines()
    assert lines[0].split(",")[7] == "preempts"
    assert [row.split(",")[7] for row in lines[1:]] == ["", "high", ""]
    assert [row.rsplit(",", 1)[1] for row in lines] == ["codes", "", "preempting", ""]
    (body,) = json.loads(render_json(report))["namespaces"]
    assert [w["codes"] for w in body["workloads"]] == [[], ["preempting"], []]


def test_nothing_to_report() -> None:
    report = build([namespace("ml")], [], POLICY, CATALOG)
    assert render_table(report) == "no workload asks for legacy GPU resources\n"


def test_unreadable_namespaces_leave_modes_unknown_and_out_of_the_rollout() -> None:
    pod = obj("Pod", "p", "ml", pod_spec(container("main", {"nvidia.com/gpu": 1})))
    why = "namespaces (GET /api/v1/namespaces: 403 forbidden): their modes are unknown"
    report = build(None, [pod], POLICY, CATALOG, unreadable=[why])
    assert [(n.name, n.mode) for n in report.namespaces] == [("ml", "unknown")]
    assert report.rollout == []
    assert render_table(report).splitlines()[-1] == f"cannot read {why}"


def test_nothing_readable_says_so() -> None:
    table = render_table(build(None, [], POLICY, CATALOG, unreadable=["pods (403)"]))
    assert table == "no workload asks for legacy GPU resources in what could be read\n" + (
        "cannot read pods (403)\n"
    )


def test_a_whole_quantity_counts_alike_everywhere() -> None:
    """`"2.0"` is 2 GPUs to the API server: to report and to the translator too."""
    spec = pod_spec(container("a", {"nvidia.com/gpu": "2.0"}))
    assert legacy_devices(spec, POLICY) == {"nvidia.com/gpu": 2}
    (template,) = translate(spec, POLICY, Catalog.of(POLICY.device_classes)).templates
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2


SERVED = Catalog.from_objects(
    [
        {
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"extendedResourceName": "nvidia.com/gpu"},
        },
        {"metadata": {"name": "mig.nvidia.com"}},
    ]
)


def test_pods_the_in_tree_path_serves_are_not_left_to_migrate() -> None:
    """Where a DeviceClass serves nvidia.com/gpu in-tree, a workload gpu2dra leaves alone
    (its namespace not enabled, or deferred) is served natively: not in the rollout."""
    whole = pod_spec(container("c", {"nvidia.com/gpu": 1}))
    init = pod_spec(
        container("c", {"nvidia.com/gpu": 1}), init=[container("i", {"nvidia.com/gpu": 1})]
    )
    mig = pod_spec(container("c", {"nvidia.com/mig-1g.5gb": 1}))
    report = build(
        [namespace("off"), namespace("on", "enabled"), namespace("mig")],
        [
            obj("Pod", "whole", "off", whole),
            obj("Pod", "whole", "on", whole),
            obj("Pod", "init", "on", init),
            obj("Pod", "mig", "mig", mig),
        ],
        POLICY,
        SERVED,
    )
    paths = {(n.name, w.name): w.path for n in report.namespaces for w in n.workloads}
    assert paths == {
        ("off", "whole"): "in-tree",
        ("on", "init"): "gpu2dra",
        ("on", "whole"): "in-tree",
        ("mig", "mig"): "device plugin",
    }
    assert report.rollout == ["mig"]
    assert not any(w.warnings for n in report.namespaces for w in n.workloads)


def test_time_sliced_workloads_that_move_once_the_cluster_shares_are_counted() -> None:
    from dataclasses import replace

    from app.core.policy import parse_policy

    policy = parse_policy(
        {"mappings": {"nvidia.com/gpu": {"deviceClassName": "gpu.nvidia.com", "consumable": {}}}}
    )
    sliced = {"nvidia.com/gpu.product": "Tesla-T4-SHARED"}
    one = {"nodeSelector": sliced, **pod_spec(container("m", {"nvidia.com/gpu": 1}))}
    two = {"nodeSelector": sliced, **pod_spec(container("m", {"nvidia.com/gpu": 2}))}
    objects = [
        obj("Deployment", "small", "ml", {"replicas": 4, "template": {"spec": one}}),
        obj("Deployment", "big", "ml", {"replicas": 1, "template": {"spec": two}}),
    ]
    unshared = replace(CATALOG, sharing={})
    report = build([namespace("ml")], objects, policy, unshared)
    rows = {w.name: w for w in report.namespaces[0].workloads}
    assert rows["small"].once_shared and rows["small"].codes == [Code.NOT_SHARING]
    assert not rows["big"].once_shared, "N replicas stay whatever the cluster shares"
    assert (
        "1 workload(s) would move once the cluster shares devices (DRA consumable capacity: "
        "gpu2dra doctor, check sharing): ml/Deployment/small"
    ) in render_table(report)
    shared = replace(CATALOG, sharing={"gpu.nvidia.com": frozenset({"", "shares"})})
    rows = {
        w.name: w for w in build([namespace("ml")], objects, policy, shared).namespaces[0].workloads
    }
    assert rows["small"].translates and not rows["small"].once_shared


def test_workloads_whose_pods_would_find_no_node_are_named() -> None:
    def deployment(name: str, **spec: Any) -> tuple[str, Obj]:
        pod = {**pod_spec(container("c", {"nvidia.com/gpu": 1})), **spec}
        return obj("Deployment", name, "ml", {"replicas": 1, "template": {"spec": pod}})

    pinned = {"nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"}}
    objects = [deployment("pinned", **pinned), deployment("plain")]
    nothing = replace(CATALOG, published=frozenset(), sharing={})
    report = build([namespace("ml", "enabled")], objects, POLICY, nothing)
    rows = {w.name: (w.node, w.path, w.codes) for w in report.namespaces[0].workloads}
    assert rows == {
        "pinned": (
            "no DRA device, cloud pool",
            "device plugin",
            [Code.NO_DRA_DEVICES, Code.CLOUD_POOL],
        ),
        "plain": ("no DRA device", "device plugin", [Code.NO_DRA_DEVICES]),
    }
    published = replace(CATALOG, published=frozenset({"gpu.nvidia.com"}), sharing={})
    report = build([namespace("ml", "enabled")], objects, POLICY, published)
    rows = {w.name: (w.node, w.path, w.codes) for w in report.namespaces[0].workloads}
    assert rows == {
        "pinned": ("cloud pool", "device plugin", [Code.CLOUD_POOL]),
        "plain": ("", "gpu2dra", []),
    }
    table = render_table(report).splitlines()
    assert table[1].split()[5:10] == ["device", "plugin", "-", "cloud", "pool"]
    lines = render_csv(report).splitlines()
    assert lines[0].split(",")[8] == "node"
    assert [row.split(",")[8] for row in lines[1:]] == ["cloud pool", ""]


def test_a_kind_no_rule_knows_shows_what_its_pods_get() -> None:
    template = {"spec": pod_spec(container("c", {"nvidia.com/gpu": 4}))}
    kind = {"apiVersion": "example.com/v1", "spec": {"template": template}}
    (_, body) = obj("CloneSet", "web", "ml", {"template": template})
    body.update(kind)
    report = build([namespace("ml")], [("CloneSet", body)], POLICY, CATALOG)
    (row,) = report.namespaces[0].workloads
    assert (row.kind, row.translates, row.warnings) == ("CloneSet", True, [])
    assert row.templates[0].endswith(": 4 x gpu.nvidia.com")


def test_wide_adds_what_translation_does_and_the_codes_and_no_headers_drops_the_header() -> None:
    envs = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    pod = pod_spec(container("c", {"nvidia.com/gpu": 1}, env=envs))
    report = build([namespace("ml")], [obj("Pod", "p", "ml", pod)], POLICY, CATALOG)
    wide = render_table(report, wide=True).splitlines()
    assert wide[0].split()[-3:] == ["WARNINGS", "TRANSLATES", "CODES"]
    assert wide[1].split()[-3:] == ["1", "yes", Code.VISIBLE_DEVICES]
    plain = render_table(report).splitlines()
    assert plain[0].split()[-1] == "WARNINGS" and wide[1].startswith(plain[1])
    assert wide[2:] == plain[2:]  # the lines under each row are the same
    bare = render_table(report, headers=False).splitlines()
    assert bare == plain[1:]  # the same columns, lined up as with the header
    assert render_csv(report, headers=False).splitlines() == render_csv(report).splitlines()[1:]


def test_nodes_mid_conversion_are_shown_after_the_workloads() -> None:
    said = "node a: converting to the DRA driver (after drain, since 2026-12-04T10:00:00Z)"
    report = replace(build([], [], POLICY, CATALOG), converting=[said])
    assert render_table(report).splitlines()[-2:] == [
        "nodes mid-conversion (gpu2dra nodes convert: resume it, or --revert):",
        f"  {said}",
    ]
    assert json.loads(render_json(report))["converting"] == [said]
