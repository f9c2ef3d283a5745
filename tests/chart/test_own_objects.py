"""The chart's part in guarding gpu2dra's own templates: the webhook is told its identity,
and the optional CronJob prunes templates no pod uses, under a role of its own."""

from __future__ import annotations

from pathlib import Path

from tests.support.webhook import of_kind, render_chart


def test_the_webhook_is_told_its_identity_and_the_extra_writers(helm: Path) -> None:
    docs = render_chart(helm, "claimTemplates.extraWriters={system:serviceaccount:ops:seeder}")
    (container,) = of_kind(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    account = of_kind(docs, "ServiceAccount")["metadata"]["name"]
    assert f"--service-account={account}" in container["args"]
    assert "--template-writer=system:serviceaccount:ops:seeder" in container["args"]


def test_pruning_is_off_by_default(helm: Path) -> None:
    assert not [d for d in render_chart(helm) if d["kind"] == "CronJob"]


def test_the_prune_cronjob_runs_under_a_role_that_can_only_list_and_delete(helm: Path) -> None:
    docs = render_chart(helm, "claimTemplates.prune.enabled=true", "claimTemplates.prune.minAge=2h")
    job = of_kind(docs, "CronJob")
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["gpu2dra"]
    assert container["args"] == ["prune-templates", "--all-namespaces", "--apply", "--min-age=2h"]
    role = [
        d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-prune")
    ]
    assert [(r["resources"], r["verbs"]) for r in role[0]["rules"]] == [
        (["pods"], ["list"]),
        (["resourceclaimtemplates"], ["list", "delete"]),
    ]
    assert pod["serviceAccountName"] == role[0]["metadata"]["name"]
