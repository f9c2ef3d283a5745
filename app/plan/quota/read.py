"""The ResourceQuotas `quota` mirrors, read from the cluster (GETs only) or from YAML."""

from __future__ import annotations

import sys

import yaml

from app.core.quota import Quota
from app.readers.client import Reader, ReadError, namespaced


def read_cluster(reader: Reader, namespace: str | None) -> list[tuple[str, Quota]]:
    items = reader.items(namespaced("/api/v1", "resourcequotas", namespace))
    return [(str(o["metadata"].get("namespace", "")), Quota.of(o)) for o in items]


def read_file(path: str, namespace: str | None) -> list[tuple[str, Quota]]:
    """ResourceQuotas from YAML (documents, or `kind: List` as `kubectl get -o yaml` gives)."""
    try:
        with open(path, encoding="utf-8") if path != "-" else sys.stdin as file:
            docs = list(yaml.safe_load_all(file))
    except (OSError, yaml.YAMLError) as err:
        raise ReadError(f"{path}: {err}") from None
    found = []
    for doc in docs:
        items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
        for obj in items or []:
            if isinstance(obj, dict) and obj.get("kind") == "ResourceQuota":
                ns = (obj.get("metadata") or {}).get("namespace") or namespace or "default"
                if namespace is None or ns == namespace:
                    found.append((str(ns), Quota.of(obj)))
    return found
