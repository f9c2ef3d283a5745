"""The API server, as a conversion reads and writes it: GETs through the readers' client,
and the writes a drain makes (node patches, evictions, Events)."""

from __future__ import annotations

from collections import Counter
from contextlib import suppress
from datetime import UTC, datetime

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.core.kube import Obj
from app.readers.client import RESOURCE, Reader, ReadError

LIVE = "status.phase!=Succeeded,status.phase!=Failed"


class ApiCluster:
    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.core = client.CoreV1Api(reader.api)

    def node(self, name: str) -> Obj:
        return self.reader.get(f"/api/v1/nodes/{name}")

    def nodes(self) -> list[Obj]:
        return self.reader.items("/api/v1/nodes")

    def pods(self) -> list[Obj]:
        return self.reader.items("/api/v1/pods", fieldSelector=LIVE)

    def namespaces(self) -> list[Obj]:
        return self.reader.items("/api/v1/namespaces")

    def dra_devices(self) -> Counter[str]:
        found: Counter[str] = Counter()
        for s in self.reader.items(f"{RESOURCE}/resourceslices"):
            spec = s.get("spec") or {}
            if spec.get("nodeName"):
                found[str(spec["nodeName"])] += len(spec.get("devices") or [])
        return found

    def patch_node(self, name: str, patch: Obj) -> None:
        try:
            self.core.patch_node(name, patch, _request_timeout=self.reader.timeout)
        except ApiException as err:
            raise ReadError(f"patch node {name}: {err.status} {err.reason}") from None

    def evict(self, namespace: str, name: str) -> str | None:
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
        try:
            self.core.create_namespaced_pod_eviction(
                name, namespace, body, _request_timeout=self.reader.timeout
            )
        except ApiException as err:
            if err.status == 404:
                return None  # gone already
            if err.status == 429:
                return "its PodDisruptionBudget allows no disruption now"
            return f"{err.status} {err.reason}"
        return None

    def event(self, node: Obj, reason: str, message: str, *, warning: bool) -> None:
        """An Event on the node, as `kubectl describe node` shows it; one that cannot be
        written does not stop the conversion."""
        now = datetime.now(UTC)
        name = node["metadata"]["name"]
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{name}.gpu2dra-", namespace="default"),
            involved_object=client.V1ObjectReference(
                kind="Node", name=name, uid=name, api_version="v1"
            ),
            reason=reason,
            message=message,
            type="Warning" if warning else "Normal",
            source=client.V1EventSource(component="gpu2dra"),
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        with suppress(ApiException):
            self.core.create_namespaced_event(
                "default", event, _request_timeout=self.reader.timeout
            )
