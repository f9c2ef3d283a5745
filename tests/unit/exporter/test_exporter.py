"""`gpu2dra exporter`: its caches joined at scrape into gpu2dra_pod_gpu_info, its endpoints,
and its registry holding nothing of the webhook's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app import cli
from app.exporter.collector import INFO
from app.exporter.gpuinfo import claim_devices, pod_gpus, slice_devices
from app.exporter.server import POD_SELECTOR, Exporter

Obj = dict[str, Any]
UUID0 = "GPU-00000000-0000-4000-8000-000000000000"


def pod(name: str, claim: str) -> Obj:
    return {
        "metadata": {"namespace": "ml", "name": name, "uid": f"uid-{name}"},
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu2dra-gpu-x1-a"}],
        },
        "status": {
            "phase": "Running",
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}],
        },
    }


def claim(name: str, device: str, driver: str = "gpu.nvidia.com") -> Obj:
    return {
        "metadata": {
            "namespace": "ml",
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "gpu2dra"},
        },
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "g"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": driver, "pool": "node-a", "device": device}
                    ]
                }
            }
        },
    }


def resource_slice(uuid: str) -> Obj:
    device = {"name": "gpu-0", "attributes": {"uuid": {"string": uuid}}}
    return {
        "spec": {
            "driver": "gpu.nvidia.com",
            "pool": {"name": "node-a", "generation": 1},
            "devices": [device],
        }
    }


def get(exporter: Exporter, path: str) -> tuple[str, bytes]:
    status: list[str] = []
    body = b"".join(exporter.app({"PATH_INFO": path}, lambda s, headers: status.append(s)))
    return status[0], body


def scrape(exporter: Exporter) -> dict[str, list[dict[str, str]]]:
    status, body = get(exporter, "/metrics")
    assert status == "200 OK"
    found: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            found.setdefault(sample.name, []).append(dict(sample.labels))
    return found


def filled() -> Exporter:
    exporter = Exporter(client.ApiClient())
    exporter.pods.put(("ml", "train"), pod_gpus(pod("train", "train-gpu-1")))
    exporter.pods.put(("ml", "cpu"), None)  # a bound pod without claims is kept as None
    exporter.claims.put(("ml", "train-gpu-1"), claim_devices(claim("train-gpu-1", "gpu-0")))
    exporter.slices.put("node-a-gpu", slice_devices(resource_slice(UUID0)))
    return exporter


def test_a_scrape_joins_the_caches_into_one_series_per_container_and_device() -> None:
    (series,) = scrape(filled())[INFO]
    assert series == {
        "namespace": "ml",
        "pod": "train",
        "pod_uid": "uid-train",
        "container": "main",
        "node": "node-a",
        "path": "gpu2dra",
        "claim": "train-gpu-1",
        "request": "gpu",
        "device_class": "g",
        "driver": "gpu.nvidia.com",
        "pool": "node-a",
        "device": "gpu-0",
        "UUID": UUID0,
        "mig_uuid": "",
        "GPU_I_PROFILE": "",
    }


def test_a_republished_slice_is_read_at_the_next_scrape() -> None:
    exporter = filled()
    scrape(exporter)
    exporter.slices.put("node-a-gpu", slice_devices(resource_slice("GPU-new")))
    assert [s["UUID"] for s in scrape(exporter)[INFO]] == ["GPU-new"]
    exporter.pods.put(("ml", "train"), None)
    assert INFO not in scrape(exporter)


def test_only_the_drivers_asked_for_are_exported() -> None:
    exporter = Exporter(client.ApiClient(), drivers=("nic.example.com",))
    exporter.pods.put(("ml", "train"), pod_gpus(pod("train", "c")))
    exporter.claims.put(("ml", "c"), claim_devices(claim("c", "gpu-0")))
    assert INFO not in scrape(exporter)
    exporter.claims.put(("ml", "c"), claim_devices(claim("c", "eth-0", "nic.example.com")))
    assert [s["device"] for s in scrape(exporter)[INFO]] == ["eth-0"]


def test_the_registry_holds_the_caches_and_nothing_of_the_webhooks() -> None:
    found = scrape(filled())
    caches = {s["cache"] for s in found["gpu2dra_cache_synced"]}
    assert caches == {"pods", "resourceclaims", "resourceslices"}
    assert not [n for n in found if n.startswith(("gpu2dra_requests", "gpu2dra_outcomes"))]
    # a scrape reads memory: no list, no watch
    assert "gpu2dra_api_calls_total" not in found


def test_ready_once_every_cache_has_synced() -> None:
    exporter = Exporter(client.ApiClient())
    assert get(exporter, "/healthz") == ("200 OK", b"ok\n")
    assert get(exporter, "/readyz")[0] == "503 Service Unavailable"
    for store in exporter.stores:
        store.synced.set()
    assert get(exporter, "/readyz") == ("200 OK", b"ok\n")
    assert get(exporter, "/other")[0] == "404 Not Found"


def test_only_bound_unfinished_pods_are_listed() -> None:
    assert POD_SELECTOR == "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


def test_the_command_without_a_cluster_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["exporter", "--kubeconfig", str(tmp_path / "none")]) == 1
    assert capsys.readouterr().err == (
        f"gpu2dra: exporter: kubeconfig {tmp_path / 'none'}: no such file\n"
    )


def test_the_info_family_is_written_as_prometheus_client_writes_it() -> None:
    exporter = filled()
    odd = pod('a\\b"c', "odd-claim")
    odd["metadata"]["namespace"] = "ml"
    exporter.pods.put(("ml", "odd"), pod_gpus(odd))
    exporter.claims.put(("ml", "odd-claim"), claim_devices(claim("odd-claim", "gpu-0")))
    assert exporter.info.render() == generate_latest(exporter.info_registry)
    assert exporter.info.render() == generate_latest(exporter.info_registry)  # from its lines
    exporter.pods.put(("ml", "odd"), None)
    assert exporter.info.render() == generate_latest(exporter.info_registry)
    assert len(exporter.info._lines) == 1  # the line of a row gone is forgotten
    empty = Exporter(client.ApiClient())
    assert empty.info.render() == generate_latest(empty.info_registry)
