"""The input's comments and layout survive `gpu2dra translate`: a document left as it was comes
back as it was written, and a translated one keeps the comments beside the nodes it keeps."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import yaml

from app.core.catalog import Catalog
from app.core.policy import Policy
from app.manifests.render import translate_text

DEPLOYMENT = """\
# Copyright: the header of the file
---
# the app, before its first key
apiVersion: apps/v1
kind: Deployment   # a deployment
metadata:
  name: app
spec:
  template:
    spec:
      containers:
        # the main container
        - name: c
          image: "x:1"  # pinned

          resources:
            limits:
              nvidia.com/gpu: 2  # two GPUs, removed with the limit
              cpu: 1 # one CPU
          args: ["a # not a comment", 'b']
          command:
            - |
              echo "# not a comment either"
              run
# after the content
"""

CONFIGMAP = """\
# left alone: written back exactly
apiVersion: v1
kind: ConfigMap   # with its spacing
metadata: {name: cm, labels: {"a": 'b'}}
data:
  a: "1"   # quoted
  script: |
    # inside a block scalar
    run
"""


def _yaml(text: str, policy: Policy, catalog: Catalog) -> str:
    return translate_text(
        text, policy, catalog, namespace="ns", mode="enabled", output="yaml"
    ).body.decode()


def _same_as_json(text: str, policy: Policy, catalog: Catalog) -> None:
    """The YAML output holds exactly the documents the JSON output does."""
    as_json = orjson.loads(
        translate_text(text, policy, catalog, namespace="ns", mode="enabled", output="json").body
    )
    got = [d for d in yaml.safe_load_all(_yaml(text, policy, catalog)) if d is not None]
    assert got == as_json["templates"] + as_json["documents"]


def _documents(out: str) -> str:
    """The stream after the one template written first (for `kubectl apply` to create it
    before the documents that use it)."""
    template, rest = out.split("---\n", 1)
    assert template.startswith("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n")
    return rest


def test_an_untouched_document_comes_back_as_written(policy: Policy, catalog: Catalog) -> None:
    out = _yaml(f"{CONFIGMAP}---\n{CONFIGMAP}", policy, catalog)
    assert out == f"{CONFIGMAP}---\n{CONFIGMAP}"


def test_a_translated_document_keeps_its_comments(policy: Policy, catalog: Catalog) -> None:
    out = _documents(_yaml(f"{DEPLOYMENT}---\n{CONFIGMAP}", policy, catalog))
    deployment, rest = out.split("---\n", 1)
    assert rest.startswith(CONFIGMAP)
    lines = deployment.splitlines()
    assert lines[:3] == [
        "# Copyright: the header of the file",
        "# the app, before its first key",
        "apiVersion: apps/v1",
    ]
    for kept in [
        "kind: Deployment   # a deployment",
        "        # the main container",
        "        - name: c",
        "          image: x:1  # pinned",
        "              cpu: 1 # one CPU",
        "            - 'a # not a comment'",
        "            - |",
        '              echo "# not a comment either"',
    ]:
        assert kept in lines, kept
    assert "" in lines  # the blank line before `resources`
    assert "two GPUs" not in deployment  # its line is gone
    assert lines[-1] == "# after the content"
    assert "claims:" in deployment
    _same_as_json(f"{DEPLOYMENT}---\n{CONFIGMAP}", policy, catalog)


def test_a_comment_beside_a_flow_mapping_stays_beside_its_key(
    policy: Policy, catalog: Catalog
) -> None:
    pod = "kind: Pod\nspec:\n  containers:\n  - name: c\n"
    out = _yaml(pod + "    resources: {limits: {nvidia.com/gpu: 1}}  # flow\n", policy, catalog)
    assert "    resources:  # flow\n" in out


def test_lists_keep_the_indentation_of_the_input(policy: Policy, catalog: Catalog) -> None:
    pod = "kind: Pod\nspec:\n  containers:\n  - name: c  # c\n    resources:\n      limits:\n"
    out = _yaml(pod + "        nvidia.com/gpu: 1\n", policy, catalog)
    assert "  containers:\n  - name: c  # c\n    resources:\n" in out
    assert "  resourceClaims:\n  - name: c-gpu\n" in out


@pytest.mark.parametrize(
    "text",
    [
        DEPLOYMENT,
        DEPLOYMENT.replace("\n", "\r\n"),
        "%YAML 1.1\n---\n" + DEPLOYMENT.split("---\n", 1)[1],
        "--- # a comment on the marker\n" + CONFIGMAP + "...\n---\n" + DEPLOYMENT,
        "--- {kind: Pod, spec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]}}"
        "\n",
        "a: &x {b: 1}  # anchor\nc: *x\n---\n" + CONFIGMAP,
        "- kind: ConfigMap  # a list of documents\n- kind: Secret\n",
        "# only a comment\n",
        "kind: Pod\nspec:\n  containers:\n  - name: c  # no image\n"
        "    resources: {limits: {nvidia.com/gpu: 1}}  # flow\n",
        "kind: Pod\nspec:\n  containers:\n"
        "  - {name: c, resources: {limits: {nvidia.com/gpu: 1}}}\n  # last\n",
        "x: 'a\n\n  # not a comment: inside a quoted scalar\n  b'\n",
    ],
)
def test_the_yaml_output_holds_what_the_json_output_does(
    text: str, policy: Policy, catalog: Catalog
) -> None:
    _same_as_json(text, policy, catalog)


def test_a_multi_line_string_a_block_cannot_hold_is_quoted(
    policy: Policy, catalog: Catalog
) -> None:
    pod: dict[str, Any] = {
        "kind": "Pod",
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "args": ["  leading\nspaces", "trailing \n  \n", "tab\there\n"],
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            ]
        },
    }
    text = "# a comment\n" + yaml.safe_dump(pod)
    _same_as_json(text, policy, catalog)
    assert _documents(_yaml(text, policy, catalog)).startswith("# a comment\n")


def test_a_tab_in_a_plain_scalar_is_written_anew(policy: Policy, catalog: Catalog) -> None:
    """libyaml reads `a<TAB>b: v1` as a key that PyYAML's own scanner refuses: such a stream
    is not written back as read (the fuzzer found it)."""
    body = "a\tb: v1\nkind: Pod\n---\nkind: Pod\nmetadata: {name: p}\n"
    out = translate_text(body, policy, catalog, namespace="ml", mode="enabled", output="yaml")
    assert list(yaml.safe_load_all(out.body)) == [
        {"a\tb": "v1", "kind": "Pod"},
        {"kind": "Pod", "metadata": {"name": "p"}},
    ]


@pytest.mark.parametrize(
    "empty",
    [
        "---\n# Source: chart/templates/empty.yaml\n",  # a template that rendered nothing
        "---\n",
        "---\n# Source: chart/templates/hpa.yaml\n# only comments\n\n",
    ],
)
def test_an_empty_document_as_helm_renders_them_leaves_the_others_as_written(
    policy: Policy, catalog: Catalog, empty: str
) -> None:
    cm = f"# Source: chart/templates/cm.yaml\n{CONFIGMAP}"
    out = _documents(_yaml(f"{empty}---\n{cm}{empty}---\n{DEPLOYMENT}{empty}", policy, catalog))
    # DEPLOYMENT's header before its `---` is a comment-only document too
    assert out.startswith(f"{cm}---\n# the app, before its first key\napiVersion: apps/v1\n")
    assert "kind: Deployment   # a deployment\n" in out  # the translated one keeps its notes
    assert "          image: x:1  # pinned\n" in out
    _same_as_json(f"{empty}---\n{cm}{empty}---\n{DEPLOYMENT}{empty}", policy, catalog)
