"""GPU asks in a custom resource's own format (Dynamo, the Spark operator, Kubeflow Pipelines):
each is named, with its document, holder and path, and nothing is rewritten."""

from __future__ import annotations

import json
from typing import Any

from app.core.catalog import Catalog
from app.core.outcomes import Code, codes
from app.core.policy import Policy
from app.manifests.documents import translate_documents

Obj = dict[str, Any]


def _notes(doc: Obj, policy: Policy, catalog: Catalog) -> list[str]:
    result = translate_documents([doc], policy, catalog, namespace="ns", mode="enabled")
    assert result.documents[0] is doc  # nothing rewritten
    return [str(n) for n in result.notes]


def test_dynamo_gpus_are_named_by_service(policy: Policy, catalog: Catalog) -> None:
    doc = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "vllm-disagg"},
        "spec": {
            "services": {
                "Frontend": {"replicas": 1},
                "VllmDecodeWorker": {"resources": {"limits": {"gpu": "4"}}},
                "VllmPrefillWorker": {"resources": {"requests": {"gpu": "1"}}},
            }
        },
    }
    notes = _notes(doc, policy, catalog)
    assert notes == [
        "document 1 (DynamoGraphDeployment vllm-disagg): spec.services.VllmDecodeWorker."
        "resources.limits.gpu asks for gpu: '4' (Dynamo's own format), which gpu2dra does not "
        "rewrite: the controller turns it into a device-plugin request in the pods it builds, "
        "which are translated at admission (in a namespace where gpu2dra is enabled)",
        "document 1 (DynamoGraphDeployment vllm-disagg): spec.services.VllmPrefillWorker."
        "resources.requests.gpu asks for gpu: '1' (Dynamo's own format), which gpu2dra does "
        "not rewrite: the controller turns it into a device-plugin request in the pods it "
        "builds, which are translated at admission (in a namespace where gpu2dra is enabled)",
    ]


def test_spark_driver_and_executor_gpus(policy: Policy, catalog: Catalog) -> None:
    gpu = {"name": "nvidia.com/gpu", "quantity": 1}
    app = {"driver": {"cores": 1, "gpu": gpu}, "executor": {"instances": 2, "gpu": gpu}}
    for kind, spec, where in [
        ("SparkApplication", app, "spec"),
        ("ScheduledSparkApplication", {"schedule": "@daily", "template": app}, "spec.template"),
    ]:
        doc = {
            "apiVersion": "sparkoperator.k8s.io/v1beta2",
            "kind": kind,
            "metadata": {"name": "pi"},
            "spec": spec,
        }
        notes = _notes(doc, policy, catalog)
        assert [n.split(": ", 1)[1].split(" (")[0] for n in notes] == [
            f"{where}.driver.gpu asks for nvidia.com/gpu: 1",
            f"{where}.executor.gpu asks for nvidia.com/gpu: 1",
        ]
        assert all("(the Spark operator's own format)" in n for n in notes)
    # A resource no mapping covers is not a GPU gpu2dra would translate.
    other = {"driver": {"gpu": {"name": "amd.com/gpu", "quantity": 1}}}
    doc = {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication"}
    assert _notes({**doc, "spec": other}, policy, catalog) == []


def test_kubeflow_pipelines_accelerator_in_its_ir(policy: Policy, catalog: Catalog) -> None:
    doc = {
        "deploymentSpec": {
            "executors": {
                "exec-train": {
                    "container": {
                        "image": "python:3.11",
                        "resources": {
                            "accelerator": {"resourceType": "nvidia.com/gpu", "resourceCount": "1"}
                        },
                    }
                }
            }
        },
        "pipelineInfo": {"name": "train"},
    }
    (note,) = _notes(doc, policy, catalog)
    assert "deploymentSpec.executors.exec-train.container.resources.accelerator asks for " in note
    assert "nvidia.com/gpu: 1 (Kubeflow Pipelines' own format)" in note


def test_a_compiled_argo_workflow_carries_the_ask_in_a_json_string(
    policy: Policy, catalog: Catalog
) -> None:
    patch = {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    component = {"executorLabel": "exec-train"}
    template = {
        "name": "system-container-impl",
        "inputs": {
            "parameters": [
                {"name": "component", "value": json.dumps(component)},
                {"name": "pod-spec-patch", "value": json.dumps(patch)},
            ]
        },
        "podSpecPatch": "{{inputs.parameters.pod-spec-patch}}",
        "container": {"image": "kfp-launcher", "command": ["launch"]},
    }
    doc = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "train-"},
        "spec": {"templates": [template]},
    }
    result = translate_documents([doc], policy, catalog, namespace="ns", mode="enabled")
    assert codes(n.text for n in result.notes) == (Code.CRD_ASK,)
    (note,) = [str(n) for n in result.notes]
    assert note.startswith(
        "document 1 (Workflow train-): spec.templates[name=system-container-impl].inputs."
        "parameters[name=pod-spec-patch].value (a JSON string) at containers[name=main]."
        "resources asks for nvidia.com/gpu: 1 (a pod spec inside a string)"
    )
