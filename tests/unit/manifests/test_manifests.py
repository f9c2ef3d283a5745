"""Offline translation of whole manifests: finding pod specs, and the `gpu2dra translate` CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli import main
from app.core.catalog import Catalog
from app.core.policy import Policy
from app.manifests.documents import (
    ManifestError,
    load_documents,
    translate_documents,
)
from app.manifests.render import Output, _pieces, translate_text

ROOT = Path(__file__).resolve().parents[3]
GPU_CONTAINER = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}
POD_SPEC = {"containers": [GPU_CONTAINER]}

KINDS: list[tuple[str, dict[str, Any], tuple[str | int, ...]]] = [
    ("Pod", {"spec": POD_SPEC}, ("spec",)),
    ("Deployment", {"spec": {"template": {"spec": POD_SPEC}}}, ("spec", "template", "spec")),
    ("StatefulSet", {"spec": {"template": {"spec": POD_SPEC}}}, ("spec", "template", "spec")),
    ("DaemonSet", {"spec": {"template": {"spec": POD_SPEC}}}, ("spec", "template", "spec")),
    ("ReplicaSet", {"spec": {"template": {"spec": POD_SPEC}}}, ("spec", "template", "spec")),
    ("Job", {"spec": {"template": {"spec": POD_SPEC}}}, ("spec", "template", "spec")),
    (
        "CronJob",
        {"spec": {"jobTemplate": {"spec": {"template": {"spec": POD_SPEC}}}}},
        ("spec", "jobTemplate", "spec", "template", "spec"),
    ),
    ("PodTemplate", {"template": {"spec": POD_SPEC}}, ("template", "spec")),
    (
        "PyTorchJob",
        {"spec": {"pytorchReplicaSpecs": {"Worker": {"template": {"spec": POD_SPEC}}}}},
        ("spec", "pytorchReplicaSpecs", "Worker", "template", "spec"),
    ),
    (
        "RayCluster",
        {"spec": {"workerGroupSpecs": [{"template": {"spec": POD_SPEC}}]}},
        ("spec", "workerGroupSpecs", 0, "template", "spec"),
    ),
    (
        "LeaderWorkerSet",
        {"spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": POD_SPEC}}}},
        ("spec", "leaderWorkerTemplate", "workerTemplate", "spec"),
    ),
]


def _at(obj: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


@pytest.mark.parametrize(("kind", "body", "path"), KINDS, ids=[k[0] for k in KINDS])
def test_pod_specs_found_in_every_kind(
    policy: Policy, catalog: Catalog, kind: str, body: dict[str, Any], path: tuple[str | int, ...]
) -> None:
    # No apiVersion: the kind alone names it (a kind no rule knows would be left whole).
    doc = {"kind": kind, "metadata": {"name": "n"}, **body}
    result = translate_documents([doc], policy, catalog, namespace="ns", mode="enabled")
    spec = _at(result.documents[0], path)
    assert spec["resourceClaims"][0]["resourceClaimTemplateName"].startswith("gpu2dra-gpu-x1-")
    assert spec["containers"][0]["resources"] == {"claims": [{"name": "c-gpu"}]}
    assert _at(doc, path) is POD_SPEC  # the input is untouched
    assert [t["metadata"]["namespace"] for t in result.templates.values()] == ["ns"]


def test_templates_are_listed_once(policy: Policy, catalog: Catalog) -> None:
    docs = [{"kind": "Pod", "metadata": {"name": str(i)}, "spec": POD_SPEC} for i in range(3)]
    assert (
        len(translate_documents(docs, policy, catalog, namespace="ns", mode="enabled").templates)
        == 1
    )


def test_skip_annotation_on_a_pod_template(policy: Policy, catalog: Catalog) -> None:
    doc = {
        "kind": "Deployment",
        "spec": {
            "template": {"metadata": {"annotations": {"gpu2dra.io/skip": "true"}}, "spec": POD_SPEC}
        },
    }
    result = translate_documents([doc], policy, catalog, namespace="ns", mode="enabled")
    assert result.documents[0] is doc and not result.templates


def test_pod_template_annotations_reach_the_translator(policy: Policy, catalog: Catalog) -> None:
    """HAMi's card selection in a pod template's annotations, offline as at admission."""

    def deployment(annotations: dict[str, str]) -> Any:
        template = {"metadata": {"annotations": annotations}, "spec": POD_SPEC}
        return {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": template}}

    picked = translate_documents(
        [deployment({"nvidia.com/use-gputype": "A100"})],
        policy,
        catalog,
        namespace="ns",
        mode="enabled",
    )
    ((_, template),) = picked.templates.items()
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert any("'A100'" in s["cel"]["expression"] for s in request["exactly"]["selectors"])
    left_doc = deployment({"nvidia.com/vgpu-mode": "mig"})
    left = translate_documents([left_doc], policy, catalog, namespace="ns", mode="enabled")
    assert left.documents[0] is left_doc and not left.templates
    assert any("nvidia.com/vgpu-mode" in n.text for n in left.notes)


def test_skipped_namespace(policy: Policy, catalog: Catalog) -> None:
    doc = {"kind": "Pod", "metadata": {"namespace": "kube-system"}, "spec": POD_SPEC}
    assert (
        translate_documents([doc], policy, catalog, namespace=None, mode="enabled").documents[0]
        is doc
    )


def test_list_and_json_inputs() -> None:
    listed = '{"kind": "List", "items": [{"kind": "Pod"}, {"kind": "Service"}]}'
    assert [d["kind"] for d in load_documents(listed)] == ["List"]
    assert [d["kind"] for d in load_documents('[{"kind": "Pod"}, {"kind": "Service"}]')] == [
        "Pod",
        "Service",
    ]
    assert load_documents("---\n---\nkind: Pod\n") == [{"kind": "Pod"}]


def test_a_list_stays_a_list_with_its_items_translated(policy: Policy, catalog: Catalog) -> None:
    dump: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": [
            {"kind": "Service", "metadata": {"name": "s"}},
            {
                "kind": "Deployment",
                "metadata": {"name": "d"},
                "spec": {"template": {"spec": POD_SPEC}},
            },
            {
                "kind": "Pod",
                "metadata": {"name": "big"},
                "spec": {
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 99}}}]
                },
            },
        ],
    }
    result = translate_documents([dump], policy, catalog, namespace="ns", mode="enabled")
    (listed,) = result.documents
    assert listed["kind"] == "List" and listed["metadata"] == dump["metadata"]
    service, deployment, big = listed["items"]
    assert service is dump["items"][0] and big is dump["items"][2]
    assert deployment["spec"]["template"]["spec"]["resourceClaims"]
    assert len(result.templates) == 1
    assert [str(n).split(" (")[0] for n in result.notes] == ["document 3"]  # items count
    text = translate_text(
        yaml.safe_dump(dump), policy, catalog, namespace="ns", mode="enabled", output="yaml"
    )
    assert [d["kind"] for d in yaml.safe_load_all(text.body)] == ["ResourceClaimTemplate", "List"]


ARGO = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Workflow",
    "metadata": {"generateName": "train-"},
    "spec": {
        "templates": [
            {
                "name": "prep",
                "script": {
                    "image": "python",
                    "source": "1",
                    **{"resources": {"limits": {"nvidia.com/gpu": 1}}},
                },
            },
            {"name": "train", "container": GPU_CONTAINER},
            {"name": "both", "containerSet": {"containers": [GPU_CONTAINER, {"name": "log"}]}},
            {"name": "cpu", "container": {"image": "x"}},
        ]
    },
}
TEKTON = {
    "apiVersion": "tekton.dev/v1",
    "kind": "Task",
    "metadata": {"name": "t"},
    "spec": {
        "steps": [
            {"name": "fit", "image": "x", "computeResources": {"limits": {"nvidia.com/gpu": 2}}},
            {"name": "push", "image": "x"},
        ]
    },
}


def test_containers_outside_pod_specs_are_named(policy: Policy, catalog: Catalog) -> None:
    result = translate_documents([ARGO, TEKTON], policy, catalog, namespace="ns", mode="enabled")
    assert result.documents == [ARGO, TEKTON]  # a containerSet is no pod spec: untouched
    assert not result.templates
    said = [str(n) for n in result.notes]
    assert [s.split(": ", 1)[0] for s in said] == [
        "document 1 (Workflow train-)",
        "document 1 (Workflow train-)",
        "document 1 (Workflow train-)",
        "document 2 (Task t)",
    ]
    assert "template 'prep' (script) asks for nvidia.com/gpu" in said[0]
    assert "template 'train' (container)" in said[1]
    assert "template 'both' (containerSet 'c')" in said[2]
    assert "a template (steps 'fit')" in said[3]
    assert all("translated at admission" in s for s in said)


def test_yaml_bomb_is_refused() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(12)
    )
    with pytest.raises(ManifestError, match="more than 100 YAML aliases"):
        load_documents(bomb)


def test_deep_nesting_is_refused(policy: Policy, catalog: Catalog) -> None:
    deep: Any = {"kind": "Thing"}
    for _ in range(100):
        deep = {"x": deep}
    with pytest.raises(ManifestError, match="nested deeper"):
        translate_documents(
            [{"kind": "Wrap", "spec": deep}], policy, catalog, namespace=None, mode="enabled"
        )
    with pytest.raises(ManifestError, match="nested too deeply"):
        load_documents("[" * 5000 + "]" * 5000)


# ---- CLI ---------------------------------------------------------------------------------


def test_cli_translate_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["translate", "-f", str(ROOT / "examples/training-job.yaml")]) == 0
    out = capsys.readouterr()
    docs = list(yaml.safe_load_all(out.out))
    assert [d["kind"] for d in docs] == ["ResourceClaimTemplate", "Job"]
    spec = docs[1]["spec"]["template"]["spec"]
    assert "nodeSelector" not in spec
    assert spec["initContainers"][0]["resources"] == {"claims": [{"name": "trainer-gpu"}]}
    assert docs[0]["metadata"]["namespace"] == "ml"
    # The toleration ExtendedResourceToleration gave the Job's pods, kept: and nothing else.
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert spec["tolerations"] == [gpu]
    assert out.err.splitlines() == [
        "warning: document 1 (Job train): toleration nvidia.com/gpu (operator Exists, effect "
        "NoSchedule) added: the ExtendedResourceToleration admission plugin gives it to pods "
        "that ask for nvidia.com/gpu, which this pod no longer does, and nodes tainted "
        "nvidia.com/gpu:NoSchedule take only pods that tolerate it (drop it where the cluster "
        "does not run the plugin)"
    ]


def test_cli_warnings_go_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - {name: c, resources: {limits: {nvidia.com/gpu.shared: 1}}}\n"
    )
    assert main(["translate", "-f", str(path), "-o", "json"]) == 0
    out = capsys.readouterr()
    assert out.err.startswith("warning: document 1 (Pod p): container 'c': nvidia.com/gpu.shared")
    listed = json.loads(out.out)
    assert (listed["apiVersion"], listed["kind"]) == ("v1", "List")
    assert [item["kind"] for item in listed["items"]] == ["Pod"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: Pod\n---\nkind: [\n", "gpu2dra: document 2: not valid YAML"),
        ("- 1\n", "gpu2dra: document 1: not a Kubernetes object"),
    ],
)
def test_cli_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    assert main(["translate", "-f", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_cli_missing_file_and_bad_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["translate", "-f", str(tmp_path / "none.yaml")]) == 1
    assert "No such file or directory" in capsys.readouterr().err
    policy = tmp_path / "policy.yaml"
    policy.write_text("defaultMode: sometimes\n")
    assert main(["translate", "-f", "-", "--policy", str(policy)]) == 1
    assert "defaultMode: must be one of enabled, audit, disabled" in capsys.readouterr().err


def test_python_m_app_reads_stdin() -> None:
    pod = (
        "kind: Pod\nspec:\n  containers:\n  - {name: c, resources: {limits: {nvidia.com/gpu: 2}}}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "app", "translate", "-f", "-"],
        input=pod,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert [d["kind"] for d in yaml.safe_load_all(done.stdout)] == ["ResourceClaimTemplate", "Pod"]


# ---- large streams over several processes --------------------------------------------------

PIECES = [
    "kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: {limits: "
    "{nvidia.com/gpu: 99}}}]}\n",  # a warning
    "kind: List\nitems:\n- kind: Pod\n  metadata: {name: b}\n  spec:\n"
    "    containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]\n- kind: Service\n",
    "",  # an empty document
    "kind: Job\nmetadata: {name: j, namespace: ml}\nspec: {template: {spec: {containers: "
    "[{name: c, resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpu.shared: 1}}}]}}}\n",
]


@pytest.mark.parametrize("output", ["yaml", "json"])
def test_a_stream_cut_into_pieces_translates_as_one(
    policy: Policy, catalog: Catalog, output: Output
) -> None:
    text = "---\n".join(PIECES * 5)
    assert len(_pieces(text, 4)) == 4, "the stream is cut"
    whole = translate_text(text, policy, catalog, namespace="ns", mode="enabled", output=output)
    cut = translate_text(
        text, policy, catalog, namespace="ns", mode="enabled", output=output, jobs=2, min_bytes=0
    )
    assert cut == whole
    # numbered as in the whole stream: a List's items count, an empty document does not
    # (the List's pod is translated, and told of the toleration it gains)
    numbers = [w.split(" (")[0] for w in cut.warnings]
    assert numbers == [f"document {4 * g + n}" for g in range(5) for n in (1, 2, 4)]


def test_a_stream_written_anew_is_not_cut(policy: Policy, catalog: Catalog) -> None:
    """A NEL (or a tab, a lone CR) anywhere makes the stream's YAML written anew: all of it,
    not only the piece that holds it (the fuzzer found the pieces disagreeing)."""
    pod = '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[]}}'
    text = f"---\nnull\n---\n{pod}\n---\n\x85null\n"
    whole = translate_text(text, policy, catalog, namespace=None, mode="enabled", output="yaml")
    cut = translate_text(
        text, policy, catalog, namespace=None, mode="enabled", output="yaml", jobs=2, min_bytes=0
    )
    assert cut == whole and b"kind: Pod\n" in whole.body


def test_an_error_in_a_later_piece_reads_as_usual(policy: Policy, catalog: Catalog) -> None:
    text = "---\n".join([*PIECES * 5, "kind: [\n", *PIECES])
    with pytest.raises(ManifestError) as whole:
        translate_text(text, policy, catalog, namespace=None, mode="enabled", output="yaml")
    with pytest.raises(ManifestError) as cut:
        translate_text(
            text,
            policy,
            catalog,
            namespace=None,
            mode="enabled",
            output="yaml",
            jobs=2,
            min_bytes=0,
        )
    assert str(cut.value) == str(whole.value)
    assert str(cut.value).startswith("document 21: not valid YAML at line 87")


@pytest.mark.parametrize(
    "text",
    ["a: &x 1\n---\nb: *x\n", "%YAML 1.1\n---\na: 1\n---\nb: 2\n", '{"kind": "List"}'],
    ids=["anchors", "directives", "json"],
)
def test_streams_that_must_stay_whole(text: str) -> None:
    assert _pieces(text, 4) == [text]


def test_a_json_list_holds_the_templates_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kubectl apply -f -` creates a List's items in order: each template before its users,
    whose pods would otherwise wait for the claim controller's retry."""
    path = tmp_path / "p.yaml"
    path.write_text(
        "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - {name: c, resources: {limits: {nvidia.com/gpu: 1}}}\n---\n"
        "kind: ConfigMap\nmetadata: {name: c}\n"
    )
    assert main(["translate", "-f", str(path), "-o", "json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    assert [item["kind"] for item in items] == ["ResourceClaimTemplate", "Pod", "ConfigMap"]
    claims = items[1]["spec"]["resourceClaims"]
    assert claims[0]["resourceClaimTemplateName"] == items[0]["metadata"]["name"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"kind": "Pod",\n "metadata": {"name": "a",\n   "name": "b"}}',
            "document 1: not valid JSON at line 3: key 'name' already set in this object at line 2",
        ),
        (
            '[{"kind": "ConfigMap"},\n {"kind": "Pod", "kind": "Job"}]',
            "document 1: not valid JSON at line 2: key 'kind' already set in this object at line 2",
        ),
        # a surrogate pair the YAML reader refuses: the key is named, without its lines
        ('{"a": "\\ud83d\\ude00", "a": 1}', "document 1: not valid JSON: key 'a' set twice"),
    ],
)
def test_json_that_sets_a_key_twice_is_refused(text: str, message: str) -> None:
    """As the API server's strict decoding refuses it: else the last would win, silently."""
    with pytest.raises(ManifestError) as refused:
        load_documents(text)
    assert str(refused.value).startswith(message)
    # The same key in two objects is no duplicate.
    assert len(load_documents('[{"kind": "Pod"}, {"kind": "Job"}]')) == 2
