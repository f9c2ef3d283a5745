"""The version-skew rule that decides whether the real test node (tests/node) may join a
control plane: a kubelet never newer than kube-apiserver, at most three minors older."""

from __future__ import annotations

import pytest

from tests.node.node import skew_problem


@pytest.mark.parametrize(
    ("kubelet", "apiserver"),
    [("v1.35.4", "v1.35.4"), ("v1.35.4", "v1.37.2"), ("v1.34.0", "v1.37.2"), ("1.37.2", "1.37.0")],
)
def test_supported(kubelet: str, apiserver: str) -> None:
    assert skew_problem(kubelet, apiserver) is None


@pytest.mark.parametrize(
    ("kubelet", "apiserver", "why"),
    [
        ("v1.37.2", "v1.35.4", "newer"),
        ("v1.37.2", "v1.34.7", "newer"),
        ("v1.33.1", "v1.37.2", "older"),
        ("v2.0.0", "v1.37.2", "newer"),
    ],
)
def test_unsupported(kubelet: str, apiserver: str, why: str) -> None:
    problem = skew_problem(kubelet, apiserver)
    assert problem is not None and why in problem
