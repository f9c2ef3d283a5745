"""The memo key holds everything translate() reads: pods that record each field read of them
are translated, and every field read must be one the key names."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from app.core.catalog import Catalog
from app.core.policy import Policy
from app.core.shape import (
    CONTAINER_FIELDS,
    CONTAINER_READS,
    CONTAINER_WORDS,
    SPEC_READS,
    VOLUMES,
    shape_of,
)
from app.core.translate import translate
from tests.support.strategies import pod_specs, setups


class Recording(dict[str, Any]):
    """A dict that notes each key asked of it (get, [], in); copies do not count."""

    def __init__(self, data: dict[str, Any], reads: set[str]) -> None:
        super().__init__(data)
        self.reads = reads

    def get(self, key: str, default: Any = None) -> Any:
        self.reads.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.reads.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.reads.add(str(key))
        return super().__contains__(key)


def recorded(spec: dict[str, Any]) -> tuple[dict[str, Any], set[str], set[str]]:
    spec_reads: set[str] = set()
    container_reads: set[str] = set()
    wrapped = dict(spec)
    for field in CONTAINER_FIELDS:
        items = spec.get(field)
        if isinstance(items, list):
            wrapped[field] = [
                Recording(c, container_reads) if isinstance(c, dict) else c for c in items
            ]
    return Recording(wrapped, spec_reads), spec_reads, container_reads


def assert_reads_are_keyed(spec: dict[str, Any], policy: Policy, catalog: Catalog) -> None:
    pod, spec_reads, container_reads = recorded(spec)
    translate(pod, policy, catalog)
    assert spec_reads <= {*SPEC_READS, *CONTAINER_FIELDS, VOLUMES}, spec_reads
    assert container_reads <= {*CONTAINER_READS, *CONTAINER_WORDS}, container_reads


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=pod_specs, setup=setups)
def test_the_memo_key_names_every_field_translate_reads(
    spec: dict[str, Any], setup: tuple[Policy, Catalog]
) -> None:
    assert_reads_are_keyed(spec, *setup)


def test_a_field_read_outside_the_key_is_caught() -> None:
    pod, spec_reads, _ = recorded({"containers": [], "hostNetwork": True})
    pod.get("hostNetwork")  # as a translator that started reading it would
    assert not spec_reads <= {*SPEC_READS, *CONTAINER_FIELDS}


def test_every_field_the_key_names_changes_it() -> None:
    base = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    for key in SPEC_READS:
        assert shape_of({**base, key: "x"}) != shape_of(base), key
    (c,) = base["containers"]
    for key in CONTAINER_READS:
        assert shape_of({"containers": [{**c, key: "x"}]}) != shape_of(base), key
    visible = {"containers": [{**c, "args": ["$NVIDIA_VISIBLE_DEVICES"]}]}
    assert shape_of(visible) != shape_of(base)
    assert shape_of({"containers": [{**c, "args": ["--rank=3"]}]}) == shape_of(base)
    assert shape_of(base, (("nvidia.com/use-gputype", "A100"),)) != shape_of(base)


def test_host_path_volumes_are_in_the_key_and_other_volumes_are_not() -> None:
    base = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    token = {**base, "volumes": [{"name": "kube-api-access-x1", "projected": {}}]}
    other = {**base, "volumes": [{"name": "kube-api-access-y2", "projected": {}}]}
    assert shape_of(token) == shape_of(other)  # replicas share their translation
    nvidia = {**base, "volumes": [{"name": "nv", "hostPath": {"path": "/dev/nvidia0"}}]}
    assert shape_of(nvidia) != shape_of(token)
