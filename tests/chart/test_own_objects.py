"""The chart's part in guarding gpu2dra's own templates: the webhook is told its identity,
and the optional CronJob prunes templates no pod uses, under a role of its own."""

from __future__ import annotations

from pathlib import Path

from tests.support.webhook import of_kind, render_chart


def test_the_webhook_is_told_its_identity_and_the_extra_writers(helm: Path) -> None:
    docs = render_chart(helm, "claimTemplates.extraWriters={system:serviceaccount:ops:seeder}")
    (container,) = of_kind(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    (account,) = [
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "ServiceAccount"
        and d["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"
    ]
    assert f"--service-account={account}" in container["args"]
    assert "--template-writer=system:serviceaccount:ops:seeder" in container["args"]


def test_pruning_is_off_by_default(helm: Path) -> None:
    assert not [d for d in render_chart(helm) if d["kind"] == "CronJob"]


def test_the_prune_cronjob_runs_under_a_role_that_can_only_list_and_delete(helm: Path) -> None:
    """It lists pods and the workloads whose pod templates name templates (a Deployment at 0
    replicas has no pod), and deletes only templates."""
    docs = render_chart(helm, "claimTemplates.prune.enabled=true", "claimTemplates.prune.minAge=2h")
    job = of_kind(docs, "CronJob")
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["gpu2dra"]
    assert container["args"] == ["prune-templates", "--all-namespaces", "--apply", "--min-age=2h"]
    role = [
        d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-prune")
    ]
    assert [(r["apiGroups"], r["resources"], r["verbs"]) for r in role[0]["rules"]] == [
        ([""], ["pods"], ["list"]),
        (["apps"], ["deployments", "statefulsets", "daemonsets", "replicasets"], ["list"]),
        (["batch"], ["jobs", "cronjobs"], ["list"]),
        (["resource.k8s.io"], ["resourceclaimtemplates"], ["list", "delete"]),
    ]
    assert pod["serviceAccountName"] == role[0]["metadata"]["name"]


def test_the_prune_cronjob_runs_the_webhook_s_image(helm: Path) -> None:
    """Registry, repository and digest as the webhook's: it used to pull `repository:tag`
    without the registry."""
    images = []
    for values in ((), ("image.digest=sha256:" + "0" * 64,), ("image.registry=",)):
        docs = render_chart(helm, "claimTemplates.prune.enabled=true", *values)
        (webhook,) = of_kind(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
        job = of_kind(docs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        (prune,) = job["containers"]
        assert prune["image"] == webhook["image"]
        images.append(prune["image"])
    assert images[0].startswith("ghcr.io/gpu2dra/gpu2dra:")
    assert images[1] == "ghcr.io/gpu2dra/gpu2dra@sha256:" + "0" * 64
    assert images[2].startswith("gpu2dra/gpu2dra:")
