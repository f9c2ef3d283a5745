"""The policy gpu2dra runs with, as the commands judge by it: the file given, else the chart's
ConfigMap beside gpu2dra's Service (found through its registrations), else the embedded
default; and where it came from."""

from __future__ import annotations

from pathlib import Path

import yaml

from app.core.mapping import PolicyError
from app.core.policy import Policy, load_policy, parse_policy
from app.readers.client import Reader, ReadError
from app.readers.registrations import registrations, service_of


def cluster_policy(reader: Reader, path: Path | None) -> tuple[Policy, str]:
    """The policy to judge by, and where it came from: the file given, else the chart's
    ConfigMap beside gpu2dra's Service, else the embedded default."""
    if path is not None:
        return load_policy(path), str(path)
    try:
        service = service_of(registrations(reader))
    except ReadError:
        service = None
    if service is not None:
        namespace, name = service
        where = f"ConfigMap {namespace}/{name}"
        try:
            cm = reader.find(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
        except ReadError as err:
            return load_policy(None).with_skipped(namespace), f"embedded default ({err})"
        text = ((cm or {}).get("data") or {}).get("policy.yaml")
        if text:
            try:
                policy = parse_policy(yaml.safe_load(text))
            except (PolicyError, yaml.YAMLError) as err:
                raise PolicyError(f"{where}: {err}") from None
            return policy.with_skipped(namespace), where
        return load_policy(None).with_skipped(namespace), f"embedded default (no {where})"
    return load_policy(None), "embedded default"
