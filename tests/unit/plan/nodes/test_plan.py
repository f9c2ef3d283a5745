"""`gpu2dra nodes plan`'s picks, from a capacity report and the nodes' pods: the product and
profile each shortfall asks for, nodes whose pods move with them first, what the device plugin
keeps for the pods that stay, and a node mid-conversion said, never picked again."""

from __future__ import annotations

from app.core.conversion import ANNOTATION, State
from app.core.kube import Obj
from app.core.policy import load_policy
from app.plan.capacity.analyse import NamespacePlan, Report, ShapeNeed
from app.plan.nodes.analyse import plan, plugin_nodes

POLICY = load_policy(None)
A100 = "NVIDIA-A100-SXM4-40GB"


def node(name: str, product: str, allocatable: dict[str, str]) -> Obj:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product}},
        "status": {"allocatable": allocatable},
    }


def pod(on: str, namespace: str, gpus: int = 1) -> Obj:
    limits = {"nvidia.com/gpu": str(gpus)}
    return {
        "metadata": {"name": f"p-{on}-{namespace}", "namespace": namespace},
        "spec": {"nodeName": on, "containers": [{"name": "c", "resources": {"limits": limits}}]},
        "status": {"phase": "Running"},
    }


def namespace(name: str, mode: str | None) -> Obj:
    return {"metadata": {"name": name, "labels": {"gpu2dra.io/migration": mode} if mode else {}}}


def need(short: int, product: str = "", profile: str = "") -> ShapeNeed:
    return ShapeNeed(
        shape=f"gpu.nvidia.com devices{f' of product {product}' if product else ''}",
        device_class="gpu.nvidia.com",
        product=product,
        profile=profile,
        capacity={},
        selectors=[],
        running=0,
        pending=short,
        replicas=0,
        held=0,
        needs=short,
        free=0,
    )


def report(*needs: ShapeNeed) -> Report:
    return Report(
        namespaces=[NamespacePlan("team", "enabled", list(needs), {}, {})],
        pools=[],
        plugin=[],
        autoscalers=[],
        sentences=[],
        unreadable=[],
    )


NODES = [
    node("a", A100, {"nvidia.com/gpu": "4"}),
    node("b", A100, {"nvidia.com/gpu": "4"}),
    node("h", "NVIDIA-H100-80GB-HBM3", {"nvidia.com/gpu": "8"}),
]
PODS = [pod("a", "legacy"), pod("b", "team")]
SPACES = [namespace("legacy", None), namespace("team", "enabled")]


def test_the_node_whose_pods_move_is_picked_and_the_plugin_keeps_room() -> None:
    nodes = plugin_nodes(NODES, PODS, SPACES, POLICY)
    result = plan(report(need(3, A100)), nodes, PODS, POLICY)
    assert [(p.node.name, p.node.moving, dict(p.node.staying)) for p in result.picks] == [
        ("b", 1, {})
    ]
    # a and h stay on the device plugin: 12 GPUs, the legacy pod holds one.
    assert result.plugin_after == {"nvidia.com/gpu": (11, 0)}
    assert result.sentences == [f"convert b for gpu.nvidia.com devices of product {A100}"]


def test_a_shortfall_takes_as_many_nodes_as_it_needs_and_says_what_is_left() -> None:
    nodes = plugin_nodes(NODES, PODS, SPACES, POLICY)
    result = plan(report(need(10, A100)), nodes, PODS, POLICY)
    assert [p.node.name for p in result.picks] == ["b", "a"]
    assert result.uncovered == [f"2 gpu.nvidia.com devices of product {A100}"]
    assert result.plugin_after == {"nvidia.com/gpu": (8, 1)}
    assert (
        "the pods that stay on the device plugin find 1 nvidia.com/gpu of the 8 left on other "
        "nodes" in result.sentences
    )


def test_a_mig_profile_is_covered_by_nodes_that_offer_it() -> None:
    mig = node("m", A100, {"nvidia.com/mig-1g.5gb": "14"})
    nodes = plugin_nodes([*NODES, mig], PODS, SPACES, POLICY)
    result = plan(report(need(7, profile="1g.5gb")), nodes, PODS, POLICY)
    assert [p.node.name for p in result.picks] == ["m"]


def test_nothing_short_picks_nothing() -> None:
    result = plan(report(), plugin_nodes(NODES, PODS, SPACES, POLICY), PODS, POLICY)
    assert result.picks == [] and result.sentences[0].startswith("nothing to convert")


def test_a_node_mid_conversion_is_said_and_not_picked() -> None:
    busy = node("b", A100, {"nvidia.com/gpu": "4"})
    busy["metadata"]["annotations"] = {
        ANNOTATION: State("dra", "drain", "gpu-operator", "2026-12-04T10:00:00Z").text()
    }
    nodes = plugin_nodes([NODES[0], busy], PODS, SPACES, POLICY)
    result = plan(report(need(3, A100)), nodes, PODS, POLICY)
    assert [p.node.name for p in result.picks] == ["a"]
    assert (
        "b is converting to the DRA driver (after drain, since 2026-12-04T10:00:00Z)"
        in result.sentences
    )
