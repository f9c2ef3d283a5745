"""AdmissionReviews the benchmarks send: a typical GPU pod (about 4 KB), a pod without GPUs,
and a ResourceClaimTemplate."""

from __future__ import annotations

from typing import Any

import orjson

Obj = dict[str, Any]


def _metadata(name: str) -> Obj:
    return {
        "generateName": f"{name}-7d9c6b5f4-",
        "namespace": "ml",
        "labels": {
            "app.kubernetes.io/name": name,
            "app.kubernetes.io/part-of": "training",
            "pod-template-hash": "7d9c6b5f4",
            "team": "vision",
        },
        "annotations": {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9400",
            "kubectl.kubernetes.io/default-container": "trainer",
        },
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"{name}-7d9c6b5f4",
                "uid": "0c4f3b8e-7d1a-4b5e-9f2a-3c6d8e1f0a2b",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


def _container(name: str, image: str, limits: Obj) -> Obj:
    return {
        "name": name,
        "image": image,
        "command": ["python", "-m", "torch.distributed.run", "--nproc-per-node=2", "train.py"],
        "env": [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(12)],
        "ports": [{"name": "metrics", "containerPort": 9400, "protocol": "TCP"}],
        "resources": {"limits": limits, "requests": {k: v for k, v in limits.items()}},
        "volumeMounts": [
            {"name": "data", "mountPath": "/data"},
            {
                "name": "kube-api-access-x7k2p",
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": True,
            },
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }


def gpu_pod() -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _metadata("trainer"),
        "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            "containers": [
                _container(
                    "trainer",
                    "nvcr.io/nvidia/pytorch:24.08-py3",
                    {"nvidia.com/gpu": "2", "cpu": "8", "memory": "64Gi"},
                ),
                _container(
                    "exporter",
                    "quay.io/prometheus/node-exporter:v1.8.2",
                    {"cpu": "100m", "memory": "64Mi"},
                ),
            ],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}},
                {
                    "name": "kube-api-access-x7k2p",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
                        ]
                    },
                },
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "priority": 0,
            "enableServiceLinks": True,
        },
    }


def plain_pod() -> Obj:
    pod = gpu_pod()
    spec = pod["spec"]
    del spec["nodeSelector"]
    for container in spec["containers"]:
        container["resources"]["limits"].pop("nvidia.com/gpu", None)
        container["resources"]["requests"].pop("nvidia.com/gpu", None)
    return pod


A100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'"


def claim_template() -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-a100", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "count": 2,
                                "selectors": [{"cel": {"expression": A100}}],
                            },
                        }
                    ]
                }
            }
        },
    }


def review(obj: Obj, kind: str = "Pod", group: str = "") -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": group, "version": "v1", "kind": kind},
                "resource": {"group": group, "version": "v1", "resource": kind.lower() + "s"},
                "requestKind": {"group": group, "version": "v1", "kind": kind},
                "requestResource": {
                    "group": group,
                    "version": "v1",
                    "resource": kind.lower() + "s",
                },
                "namespace": "ml",
                "operation": "CREATE",
                "userInfo": {
                    "username": "system:serviceaccount:kube-system:replicaset-controller",
                    "uid": "8c5b2c5e-1f0e-4c7d-9c2a-5b1e7d3f9a10",
                    "groups": [
                        "system:serviceaccounts",
                        "system:serviceaccounts:kube-system",
                        "system:authenticated",
                    ],
                },
                "object": obj,
                "oldObject": None,
                "dryRun": False,
                "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
            },
        }
    )
