"""examples/: what the docs show of them is what they hold, and each translates as it says."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from app.core.catalog import Catalog
from app.core.policy import load_policy
from app.manifests.documents import load_documents, translate_documents
from app.webhook.cluster import OfflineCluster
from app.webhook.mutate import Mutator
from app.webhook.reviews import parse_review, review
from app.webhook.verdicts import Verdict

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _blocks(page: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", (ROOT / page).read_text(), re.DOTALL)


def test_the_argo_cd_plugin_in_the_docs_is_the_example_and_reads_as_one() -> None:
    """docs/getting-started/gitops.md shows examples/gitops/argocd/plugin.yaml whole (its
    generate command is run as written in tests/chart/test_gitops_examples.py)."""
    plugin = (EXAMPLES / "gitops" / "argocd" / "plugin.yaml").read_text()
    assert plugin in _blocks("docs/getting-started/gitops.md", "yaml")
    found = yaml.safe_load(plugin)
    assert (found["apiVersion"], found["kind"]) == (
        "argoproj.io/v1alpha1",
        "ConfigManagementPlugin",
    )
    assert "discover" not in found["spec"]  # only Applications that name it use it
    generate = found["spec"]["generate"]
    assert generate["command"] == ["bash", "-c"] and len(generate["args"]) == 1
    assert "gpu2dra translate --strict" in generate["args"][0]
    application = yaml.safe_load((EXAMPLES / "gitops" / "argocd" / "application.yaml").read_text())
    assert application["spec"]["source"]["plugin"] == {"name": found["metadata"]["name"]}
    assert (ROOT / application["spec"]["source"]["path"] / "kustomization.yaml").is_file()


def _translate(name: str, policy: str | None = None) -> tuple[list[Any], list[str], list[str]]:
    """examples/<name> as `gpu2dra translate` reads it: the documents then the templates, the
    warnings, and their outcome codes."""
    chosen = load_policy(EXAMPLES / policy if policy else None)
    docs = load_documents((EXAMPLES / name).read_text())
    done = translate_documents(
        docs,
        chosen,
        Catalog.of(chosen.device_classes),
        namespace=None,
        mode="enabled",
        offline=True,
    )
    said = [str(n.text) for n in done.notes]
    return [*done.documents, *done.templates.values()], said, [n.text.code for n in done.notes]


def _claims(doc: Any) -> list[str]:
    spec = doc["spec"]["template"]["spec"]
    return [c["resourceClaimTemplateName"] for c in spec.get("resourceClaims", [])]


def test_the_mig_job_asks_for_two_devices_of_its_profile() -> None:
    (job, template), _, codes = _translate("mig-job.yaml")
    assert _claims(job) == [template["metadata"]["name"]]
    [request] = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert request["exactly"]["count"] == 2
    [selector] = request["exactly"]["selectors"]
    assert selector["cel"]["expression"] == (
        "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
    )
    assert codes == ["toleration"]


def test_the_deployment_s_replicas_share_one_template() -> None:
    (deployment, template), _, _ = _translate("deployment.yaml")
    assert deployment["spec"]["replicas"] == 3 and _claims(deployment) == [
        template["metadata"]["name"]
    ]
    limits = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"memory": "16Gi"}  # the GPU is a claim now; the rest stays
    [request] = template["spec"]["spec"]["devices"]["requests"]
    assert (request["exactly"]["deviceClassName"], request["exactly"]["count"]) == (
        "gpu.nvidia.com",
        1,
    )


def test_the_hami_notebook_stays_by_default_and_moves_with_its_policy() -> None:
    [left], warnings, codes = _translate("hami-notebook.yaml")
    assert codes == ["vendor-resource"] and "nvidia.com/gpumem" in warnings[0]
    assert left == yaml.safe_load((EXAMPLES / "hami-notebook.yaml").read_text())
    (notebook, template), _, codes = _translate("hami-notebook.yaml", "hami-policy.yaml")
    assert _claims(notebook) == [template["metadata"]["name"]]
    [request] = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["capacity"] == {"requests": {"memory": "4096Mi"}}
    assert "consumable" in codes


def test_the_admission_review_is_one_the_webhook_reads() -> None:
    """examples/admissionreview.json, the request of docs/reference/endpoints.md's first
    request: a valid review of a Pod create asking for a GPU, answered as the docs show
    (tests/serving/test_first_run.py sends it to a real `gpu2dra serve` with curl)."""
    body = (EXAMPLES / "admissionreview.json").read_bytes()
    adm = parse_review(body)
    assert (adm["operation"], adm["kind"]["kind"], adm["namespace"]) == ("CREATE", "Pod", "ml")
    policy = load_policy(None)
    verdict = Mutator(policy)(adm, OfflineCluster(policy))
    assert isinstance(verdict, Verdict)
    [documented] = _blocks("docs/reference/endpoints.md", "json")
    assert json.loads(review(adm["uid"], verdict.response)) == json.loads(documented)
