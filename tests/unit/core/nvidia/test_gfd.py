"""GPU Feature Discovery node terms (app/core/nvidia/gfd.py): which become device selectors,
and which stay on the node side. The selectors they become are test_gfd_cel.py's; the pods in
and out, rows of translation_cases.py."""

from __future__ import annotations

from typing import Any

import yaml

from app.core.catalog import Catalog
from app.core.policy import DEFAULT_POLICY_YAML, load_policy, parse_policy
from app.core.translate import translate
from tests.support.pods import GPU, PRODUCT_A100, container, gpu, tpl


def _default_raw() -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY_YAML)
    assert load_policy(None) == parse_policy(raw)
    return raw


def test_keep_node_selectors(catalog: Catalog) -> None:
    policy = parse_policy({**_default_raw(), "keepNodeSelectors": True})
    spec = {
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
        "containers": [container("c", gpu(1))],
    }
    result = translate(spec, policy, catalog)
    assert result.spec["nodeSelector"] == spec["nodeSelector"]
    assert result.templates[0]["metadata"]["name"] == tpl("gpu", GPU, 1, PRODUCT_A100)
