"""gpu2dra's own templates are never taken on trust: a template under gpu2dra's name is used
only when it holds exactly what gpu2dra writes (its spec, its label), from the cache on the
hot path and from the API server's copy on AlreadyExists; otherwise the pod is left alone."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.core.policy import Policy
from app.core.templates import DeviceRequest, owned
from app.webhook.cluster import Cached, LiveCluster, cached
from app.webhook.clusterview import TemplateSquatted
from app.webhook.metrics import Metrics
from app.webhook.mutate import Mutator
from tests.support.fake import FakeCluster
from tests.unit.admission import pod, request, run

Obj = dict[str, Any]
ONE_GPU = DeviceRequest("gpu", "gpu.nvidia.com", 1, ())


def live(template: Obj, namespace: str = "ml") -> Obj:
    """The template as the API server returns it: with the fields it adds."""
    obj = copy.deepcopy(template)
    obj["metadata"].update(
        namespace=namespace,
        uid="0a1b",
        resourceVersion="42",
        creationTimestamp="2025-01-01T00:00:00Z",
        managedFields=[{"manager": "gpu2dra"}],
    )
    obj["spec"]["metadata"] = {}  # the claims' ObjectMeta, as 1.34 to 1.37 write it
    return obj


def refused(metrics: Metrics) -> float:
    return metrics.registry.get_sample_value("gpu2dra_templates_refused_total") or 0.0


def test_the_api_servers_copy_of_gpu2dras_template_is_gpu2dras() -> None:
    want = owned(ONE_GPU.template())
    assert cached(live(ONE_GPU.template())).digest == want.digest


def test_a_three_gpu_template_under_the_one_gpu_name_is_not_used() -> None:
    want = owned(ONE_GPU.template())
    squat = live(ONE_GPU.template())
    squat["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 3
    cluster = LiveCluster(client.ApiClient(), Metrics())
    cluster.templates.items[("ml", want.name)] = cached(squat)
    assert not cluster.has_templates("ml", [want])

    def create(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("no API call: the cache already says whose it is")

    cluster._resource.create_namespaced_resource_claim_template = create
    with pytest.raises(TemplateSquatted, match=r"ml/gpu2dra-gpu-x1-.* is not gpu2dra's .*3 x gpu"):
        asyncio.run(cluster.ensure_templates("ml", [want]))
    assert refused(cluster._metrics) == 1


def test_a_template_without_gpu2dras_label_is_not_used() -> None:
    want = owned(ONE_GPU.template())
    unlabelled = live(ONE_GPU.template())
    unlabelled["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "someone"}
    cluster = LiveCluster(client.ApiClient(), Metrics())
    cluster.templates.items[("ml", want.name)] = cached(unlabelled)
    assert not cluster.has_templates("ml", [want])
    with pytest.raises(TemplateSquatted, match=r"no label app\.kubernetes\.io/managed-by=gpu2dra"):
        asyncio.run(cluster.ensure_templates("ml", [want]))


def test_metadata_for_the_claims_is_another_spec() -> None:
    obj = live(ONE_GPU.template())
    obj["spec"]["metadata"] = {"labels": {"x": "y"}}
    assert cached(obj).digest != owned(ONE_GPU.template()).digest


def test_the_cache_answers_a_template_that_is_gpu2dras_without_a_call() -> None:
    want = owned(ONE_GPU.template())
    cluster = LiveCluster(client.ApiClient(), Metrics())
    cluster.templates.items[("ml", want.name)] = cached(live(ONE_GPU.template()))
    assert cluster.has_templates("ml", [want])
    assert not cluster.has_templates("other", [want])


class Existing:
    """create answers 409 AlreadyExists; read answers `obj`."""

    def __init__(self, obj: Obj) -> None:
        self.obj, self.reads = obj, 0

    def create(self, *args: Any, **kwargs: Any) -> None:
        raise ApiException(409, "AlreadyExists")

    def read(self, name: str, namespace: str, **kwargs: Any) -> Any:
        self.reads += 1

        class Response:
            data = orjson.dumps(self.obj)

        return Response()


def already_exists(obj: Obj) -> tuple[LiveCluster, Existing]:
    cluster, api = LiveCluster(client.ApiClient(), Metrics()), Existing(obj)
    cluster._resource.create_namespaced_resource_claim_template = api.create
    cluster._resource.read_namespaced_resource_claim_template = api.read
    return cluster, api


def test_already_exists_is_success_only_when_the_servers_copy_is_gpu2dras() -> None:
    want = owned(ONE_GPU.template())
    cluster, api = already_exists(live(ONE_GPU.template()))
    asyncio.run(cluster.ensure_templates("ml", [want]))
    assert api.reads == 1 and cluster.has_templates("ml", [want])

    squat = live(ONE_GPU.template())
    squat["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 3
    cluster, api = already_exists(squat)
    with pytest.raises(TemplateSquatted, match="another spec"):
        asyncio.run(cluster.ensure_templates("ml", [want]))
    assert refused(cluster._metrics) == 1
    # What the server holds is now in the cache: the next pod is refused without a call.
    with pytest.raises(TemplateSquatted):
        asyncio.run(cluster.ensure_templates("ml", [want]))
    assert api.reads == 1


# ---- the property: any difference at all is refused ----------------------------------------

requests = st.builds(
    DeviceRequest,
    name=st.sampled_from(["gpu", "main-gpu", "mig-1g-10gb"]),
    device_class=st.sampled_from(["gpu.nvidia.com", "mig.nvidia.com"]),
    devices=st.integers(1, 32),
    selectors=st.lists(
        st.sampled_from(["device.attributes['x'].y == 'z'", "true"]), max_size=2
    ).map(tuple),
    config=st.sampled_from(
        ["", orjson.dumps({"kind": "GpuConfig", "sharing": {"strategy": "MPS"}}).decode()]
    ),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 40) | st.floats(-2, 2) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*at, i))
    return found


@st.composite
def changed_specs(draw: st.DrawFn, spec: Obj) -> Obj:
    """`spec` with one change somewhere: a value replaced, a key added, or an item dropped."""
    changed = copy.deepcopy(spec)
    path = draw(st.sampled_from(_paths(changed)[1:]))
    parent = changed
    for step in path[:-1]:
        parent = parent[step]
    how = draw(st.sampled_from(["replace", "add", "drop"]))
    if how == "replace":
        parent[path[-1]] = draw(json_values)
    elif how == "add" and isinstance(parent, dict):
        parent[draw(st.text(min_size=1, max_size=5))] = draw(json_values)
    elif how == "add" and isinstance(parent, list):
        parent.append(draw(json_values))
    else:
        del parent[path[-1]]
    return changed


def _canonical(spec: Obj) -> bytes:
    """The spec as JSON, sorted; the claims' metadata, empty, is as good as absent."""
    if spec.get("metadata") == {}:
        spec = {k: v for k, v in spec.items() if k != "metadata"}
    return orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), req=requests)
def test_a_template_that_differs_in_any_field_is_refused(
    data: st.DataObject, req: DeviceRequest
) -> None:
    want = owned(req.template())
    obj = live(req.template())
    obj["spec"] = data.draw(changed_specs(obj["spec"]))
    same = _canonical(obj["spec"]) == _canonical(req.template()["spec"])
    assert (cached(obj).digest == want.digest) is same


@settings(max_examples=100, deadline=None)
@given(req=requests, labels=st.dictionaries(st.text(max_size=30), st.text(max_size=8), max_size=3))
def test_a_template_without_exactly_gpu2dras_label_is_refused(
    req: DeviceRequest, labels: dict[str, str]
) -> None:
    obj = live(req.template())
    obj["metadata"]["labels"] = labels
    ours = labels.get("app.kubernetes.io/managed-by") == "gpu2dra"
    assert (cached(obj).digest == owned(req.template()).digest) is ours


# ---- what the pod gets --------------------------------------------------------------------


def test_a_squatted_name_leaves_the_pod_unchanged_with_a_warning(policy: Policy) -> None:
    cluster = FakeCluster(labels={"ml": {"gpu2dra.io/migration": "enabled"}})
    outcome = Mutator(policy).prepare(pod()["spec"], cluster.catalog)
    (template,) = outcome.templates
    cluster.squatted.add(("ml", template.name))
    answer = run(Mutator(policy)(request(pod()), cluster))
    assert "patch" not in answer and answer["allowed"]
    (warning, *_) = answer["warnings"]
    assert warning.startswith("gpu2dra will not translate the pod: ResourceClaimTemplate ml/")
    assert template.name in warning and warning.endswith("pod admitted unchanged")


def test_a_squatted_name_denies_the_pod_under_on_error_deny(policy: Policy) -> None:
    from dataclasses import replace

    deny = replace(policy, on_error="deny")
    cluster = FakeCluster(labels={"ml": {"gpu2dra.io/migration": "enabled"}})
    (template,) = Mutator(deny).prepare(pod()["spec"], cluster.catalog).templates
    cluster.squatted.add(("ml", template.name))
    answer = run(Mutator(deny)(request(pod()), cluster))
    assert not answer["allowed"] and template.name in answer["status"]["message"]


def test_cached_keeps_the_requests_for_validate() -> None:
    found = cached(live(ONE_GPU.template()))
    assert isinstance(found, Cached) and [r.devices for r in found.requests] == [1]


def test_an_unlabelled_template_under_gpu2dras_name_is_found_without_a_cache_of_it() -> None:
    """The cache holds only labelled templates: an unlabelled one under gpu2dra's name is found
    by the create's AlreadyExists and the read of that one object, and not kept, since no
    label-selected watch would say when it is deleted: once it is, the next pod makes
    gpu2dra's."""
    want = owned(ONE_GPU.template())
    unlabelled = live(ONE_GPU.template())
    del unlabelled["metadata"]["labels"]
    cluster, api = already_exists(unlabelled)
    for _ in range(2):
        with pytest.raises(TemplateSquatted, match="no label"):
            asyncio.run(cluster.ensure_templates("ml", [want]))
    assert api.reads == 2 and ("ml", want.name) not in cluster.templates.items
