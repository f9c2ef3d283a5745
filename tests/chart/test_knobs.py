"""The TLS Secret of tls.mode=helm, in a template of its own."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.webhook import CHART, of_kind, render_chart

Obj = dict[str, Any]


def show_only(helm: Path, template: str, *values: str) -> list[Obj]:
    args = [str(helm), "template", "gpu2dra", str(CHART), "-n", "gpu2dra-system"]
    args += ["--show-only", f"templates/{template}"]
    for value in values:
        args += ["--set", value]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_the_helm_mode_secret_has_a_template_of_its_own(helm: Path) -> None:
    (secret,) = show_only(helm, "tls-secret.yaml")
    assert secret["kind"] == "Secret"
    assert secret["metadata"]["name"] == "gpu2dra-tls"
    assert secret["type"] == "kubernetes.io/tls"
    assert sorted(secret["data"]) == ["ca.crt", "tls.crt", "tls.key"]
    assert b"BEGIN CERTIFICATE" in base64.b64decode(secret["data"]["ca.crt"])
    webhooks = show_only(helm, "webhooks.yaml")
    assert [d["kind"] for d in webhooks] == [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    # one CA per render, whichever template asks first: the Secret's is the webhooks'
    docs = render_chart(helm)
    ca = of_kind(docs, "Secret")["data"]["ca.crt"]
    bundles = {
        hook["clientConfig"]["caBundle"]
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for hook in of_kind(docs, kind)["webhooks"]
    }
    assert bundles == {ca}
    for values in (
        ("tls.mode=cert-manager",),
        ("tls.mode=secret", "tls.secretName=s", "tls.caBundle=Q0EK"),
    ):
        assert "Secret" not in {d["kind"] for d in render_chart(helm, *values)}
