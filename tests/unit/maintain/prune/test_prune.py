"""`gpu2dra prune-templates`: which of gpu2dra's templates go, and the last look before each
delete."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.cli import main
from app.maintain.prune.delete import delete
from app.maintain.prune.fates import Fate, plan
from app.maintain.prune.render import render_json, render_text
from app.readers.output import structured

Obj = dict[str, Any]
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
OURS = {"app.kubernetes.io/managed-by": "gpu2dra"}


def template(
    name: str, namespace: str = "ml", age: timedelta = timedelta(days=2), labels: Obj = OURS
) -> Obj:
    meta = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "resourceVersion": "7",
        "creationTimestamp": (NOW - age).isoformat().replace("+00:00", "Z"),
        "labels": labels,
    }
    return {"metadata": meta, "spec": {"spec": {}}}


def pod(name: str, *templates: str, namespace: str = "ml", phase: str = "Running") -> Obj:
    claims = [{"name": f"c{i}", "resourceClaimTemplateName": t} for i, t in enumerate(templates)]
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"resourceClaims": claims},
        "status": {"phase": phase},
    }


def fates(
    templates: list[Obj], pods: list[Obj], younger: timedelta = timedelta(hours=1)
) -> dict[str, tuple[str, str]]:
    return {f.key: (f.action, f.why) for f in plan(templates, pods, NOW, younger)}


def test_a_template_a_live_pod_uses_is_kept() -> None:
    got = fates(
        [template("gpu2dra-a"), template("gpu2dra-b"), template("gpu2dra-c")],
        [
            pod("p", "gpu2dra-a"),
            pod("done", "gpu2dra-b", phase="Succeeded"),
            pod("q", "gpu2dra-c", phase="Pending"),
        ],
    )
    assert got == {
        "ml/gpu2dra-a": ("keep", "used by pod p"),
        "ml/gpu2dra-b": ("delete", "no live pod uses it"),
        "ml/gpu2dra-c": ("keep", "used by pod q"),
    }


def test_use_is_by_namespace() -> None:
    got = fates(
        [template("gpu2dra-a", "ml"), template("gpu2dra-a", "other")],
        [pod("p", "gpu2dra-a", namespace="other")],
    )
    assert got["ml/gpu2dra-a"][0] == "delete" and got["other/gpu2dra-a"][0] == "keep"


def test_only_gpu2dras_templates_are_considered() -> None:
    got = fates(
        [
            template("mine"),
            template("gpu2dra-x", labels={"app.kubernetes.io/managed-by": "helm"}),
        ],
        [],
    )
    assert got == {}


def test_a_young_template_is_kept() -> None:
    got = fates([template("gpu2dra-new", age=timedelta(minutes=5))], [])
    assert got["ml/gpu2dra-new"] == (
        "keep",
        "unused, but made 5m ago: a pod being admitted may be about to use it",
    )
    assert (
        fates([template("gpu2dra-new", age=timedelta(minutes=5))], [], timedelta(0))[
            "ml/gpu2dra-new"
        ][0]
        == "delete"
    )


UNUSED = Fate("ml", "gpu2dra-a", "delete", "no live pod uses it", uid="uid-a", resource_version="7")


def test_the_last_look_keeps_a_template_a_new_pod_uses() -> None:
    def remove(*args: Any) -> None:
        raise AssertionError("never deleted while in use")

    kept = delete(UNUSED, lambda ns: [pod("new", "gpu2dra-a")], remove)
    assert (kept.action, kept.why) == ("keep", "used by pod new now")


def test_the_delete_carries_uid_and_resource_version() -> None:
    seen: list[Any] = []
    done = delete(UNUSED, lambda ns: [], lambda name, ns, options: seen.append((name, ns, options)))
    assert done.action == "delete"
    ((name, ns, options),) = seen
    assert (name, ns) == ("gpu2dra-a", "ml")
    assert options.preconditions == client.V1Preconditions(uid="uid-a", resource_version="7")


@pytest.mark.parametrize(
    ("status", "why"), [(404, "already gone"), (409, "changed since it was listed")]
)
def test_a_template_gone_or_changed_is_kept(status: int, why: str) -> None:
    def remove(*args: Any) -> None:
        raise ApiException(status, "x")

    assert delete(UNUSED, lambda ns: [], remove).why == why


def test_min_age_is_a_duration(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["prune-templates", "--min-age", "soon"])
    assert "not a duration" in capsys.readouterr().err


def deployment(name: str, *templates: str, namespace: str = "ml", replicas: int = 0) -> Obj:
    claims = [{"name": f"c{i}", "resourceClaimTemplateName": t} for i, t in enumerate(templates)]
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "template": {"spec": {"resourceClaims": claims}}},
    }


def cronjob(name: str, *templates: str, namespace: str = "ml") -> Obj:
    claims = [{"name": f"c{i}", "resourceClaimTemplateName": t} for i, t in enumerate(templates)]
    pod_template = {"spec": {"resourceClaims": claims}}
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"jobTemplate": {"spec": {"template": pod_template}}},
    }


def test_a_template_a_workloads_pod_template_names_is_kept() -> None:
    """A Deployment at 0 replicas, or a CronJob between runs, has no live pod, but its next
    pods name the template: deleting it would leave them Pending."""
    got = {
        f.key: (f.action, f.why)
        for f in plan(
            [template("gpu2dra-a"), template("gpu2dra-b"), template("gpu2dra-c")],
            [],
            NOW,
            timedelta(hours=1),
            workloads=[
                ("Deployment", deployment("idle", "gpu2dra-a")),
                ("CronJob", cronjob("nightly", "gpu2dra-b")),
                ("Deployment", deployment("elsewhere", "gpu2dra-c", namespace="other")),
            ],
        )
    }
    assert got["ml/gpu2dra-a"] == ("keep", "named by the pod template of Deployment idle")
    assert got["ml/gpu2dra-b"] == ("keep", "named by the pod template of CronJob nightly")
    assert got["ml/gpu2dra-c"][0] == "delete"


def test_the_last_look_reads_the_workloads_again() -> None:
    def remove(*args: Any) -> None:
        raise AssertionError("never deleted while a workload names it")

    kept = delete(
        UNUSED,
        lambda ns: [],
        remove,
        workloads=lambda ns: [("StatefulSet", deployment("db", "gpu2dra-a"))],
    )
    assert (kept.action, kept.why) == ("keep", "named by the pod template of StatefulSet db now")


def test_a_template_made_for_a_pod_never_stored_is_deleted() -> None:
    """The API server refused the pod after gpu2dra made its template: no pod, no workload
    names it, and once past --min-age it goes."""
    got = fates([template("gpu2dra-refused", age=timedelta(hours=2))], [])
    assert got["ml/gpu2dra-refused"] == ("delete", "no live pod uses it")


def test_what_becomes_of_each_template_as_text_and_as_yaml() -> None:
    fates = [
        Fate("ml", "gpu2dra-a", "delete", "no live pod uses it"),
        Fate("ml", "gpu2dra-b", "keep", "used by pod p"),
    ]
    assert render_text(fates, unused=1, namespace="ml", applied=False).splitlines() == [
        "would delete ml/gpu2dra-a: no live pod uses it",
        "keep ml/gpu2dra-b: used by pod p",
        "2 gpu2dra template(s) in namespace ml, 1 unused; a dry run: --apply deletes them",
    ]
    # Applied, a template a pod took meanwhile is kept: 1 unused, 0 deleted.
    kept = [replace(fates[0], action="keep", why="a pod uses it now"), fates[1]]
    assert render_text(kept, unused=1, namespace=None, applied=True).splitlines()[-1] == (
        "2 gpu2dra template(s) in every namespace, 1 unused; 0 deleted"
    )
    body = yaml.safe_load(structured(render_json(fates, namespace="ml", applied=False), "yaml"))
    assert body == {
        "namespace": "ml",
        "applied": False,
        "templates": [
            {
                "namespace": "ml",
                "name": "gpu2dra-a",
                "action": "delete",
                "why": "no live pod uses it",
            },
            {"namespace": "ml", "name": "gpu2dra-b", "action": "keep", "why": "used by pod p"},
        ],
    }
