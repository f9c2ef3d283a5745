"""A first run offline explains itself: without a cluster no namespace's labels are read, so
with the default policy (defaultMode: disabled) /mutate admits a GPU pod unchanged, and says
why in the answer, its outcome code and the log."""

from __future__ import annotations

import logging

import pytest

from app.core.outcomes import Code
from app.core.policy import Policy, parse_policy
from app.webhook.application import make_cluster
from app.webhook.cluster import OfflineCluster
from app.webhook.metrics import Metrics
from app.webhook.mutate import Mutator
from app.webhook.settings import Settings
from app.webhook.verdicts import Verdict
from tests.support.fake import FakeCluster
from tests.unit.admission import patched, pod, request, run


def test_a_gpu_pod_offline_is_admitted_unchanged_with_why(policy: Policy) -> None:
    verdict = Mutator(policy)(request(pod()), OfflineCluster(policy))
    assert isinstance(verdict, Verdict)  # decided without awaiting: offline asks nothing
    answer = verdict.response
    assert set(answer) == {"allowed", "warnings"} and answer["allowed"]
    [warning] = answer["warnings"]
    assert "serves offline and reads no namespace's labels, so namespace ml" in warning
    assert "defaultMode, disabled: pod admitted unchanged" in warning
    assert verdict.codes == (Code.NAMESPACE_UNSEEN,)


def test_offline_a_pod_without_gpus_gets_a_bare_allow(policy: Policy) -> None:
    plain = pod({"containers": [{"name": "c", "image": "i"}]})
    assert run(Mutator(policy)(request(plain), OfflineCluster(policy))) == {"allowed": True}


def test_offline_with_default_mode_enabled_translates(policy: Policy) -> None:
    enabled = parse_policy({"defaultMode": "enabled"})
    cluster = OfflineCluster(enabled)
    answer = run(Mutator(enabled)(request(pod()), cluster))
    assert "resourceClaims" in patched(pod(), answer)["spec"]


def test_a_cluster_s_disabled_namespace_still_gets_a_bare_allow(policy: Policy) -> None:
    """Live, a namespace without the label chose nothing: no warning on each of its pods."""
    assert run(Mutator(policy)(request(pod()), FakeCluster())) == {"allowed": True}


@pytest.mark.parametrize(("mode", "said"), [("disabled", True), ("enabled", False)])
def test_serving_offline_says_once_what_it_means(
    mode: str, said: bool, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(policy=parse_policy({"defaultMode": mode}), offline=True)
    with caplog.at_level(logging.INFO, logger="gpu2dra"):
        assert isinstance(make_cluster(settings, Metrics()), OfflineCluster)
    lines = [r.getMessage() for r in caplog.records if "namespace-unseen" in r.getMessage()]
    assert len(lines) == (1 if said else 0)
    if said:
        assert lines[0].startswith("offline: no namespace's labels are read")
        assert "POST /translate translates as enabled" in lines[0]
