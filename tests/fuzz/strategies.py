"""The fuzz suite's own hypothesis settings (FUZZ) and random manifests, sane and broken."""

from __future__ import annotations

from typing import Any

import orjson
import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.support.strategies import json_values, pod_specs

FUZZ = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

WRAPPERS = [
    lambda spec: {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec},
    lambda spec: {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ml"},
        "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": spec}},
    },
    lambda spec: {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "c"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}},
    },
    lambda spec: {"kind": "List", "items": [{"kind": "Pod", "spec": spec}, {"kind": "Pod"}]},
    lambda spec: {
        "kind": "RayCluster",
        "spec": {"workerGroupSpecs": [{"template": {"spec": spec}}]},
    },
]
# Fragments a YAML parser must get right, dropped into otherwise sane manifests.
YAML_BITS = [
    "&a ", "*a", "*b", "<<: *a\n", "!!binary ", "!!set ", "!!python/object:os.system ", "!x ",
    "? ", ": ", "- ", "---\n", "...\n", "%YAML 1.1\n", "%TAG ! tag:x,2000:\n", "{", "}", "[",
    "]", ",", "\t", "'", '"', "|", ">", "#", "\\ud800", "\x00", "\x85", "\ufeff", "\U0001f680",
    "1e400", "0x1F", "0o17", ".nan", "~", "2001-12-14", "123456789012345678901234567890",
]  # fmt: skip


@st.composite
def manifests(draw: st.DrawFn) -> bytes:
    docs: list[Any] = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.integers(0, 4)) == 0:
            docs.append(draw(json_values))
        else:
            docs.append(draw(st.sampled_from(WRAPPERS))(draw(pod_specs)))
    try:
        if draw(st.booleans()):
            text = yaml.safe_dump_all(docs, sort_keys=False)
        else:
            text = orjson.dumps(docs[0]).decode()
    except (yaml.YAMLError, TypeError):  # integers over 64 bits in JSON
        text = "{}"
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(YAML_BITS)) + text[at:]
    return text.encode("utf-8", "surrogatepass")
