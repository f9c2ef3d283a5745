"""What `explain` knows of a pod: the pod, and each thing it depends on as read, a ReadError
where it could not be."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.core.autoscalers import Autoscaler
from app.core.kube import Obj
from app.core.kueue import Kueue
from app.readers.client import Listed, ReadError

# What was read; a ReadError in place of what could not be (None: it does not exist).
Found = Obj | ReadError | None


@dataclass(frozen=True, slots=True)
class PodFacts:
    pod: Obj
    namespace_labels: Mapping[str, str] | ReadError | None
    device_classes: Listed
    templates: dict[str, Found] = field(default_factory=dict)  # by name
    claim_names: dict[str, str | None] = field(default_factory=dict)  # pod claim -> ResourceClaim
    claims: dict[str, Found] = field(default_factory=dict)  # by ResourceClaim name
    all_claims: Listed = field(default_factory=list)
    slices: Listed = field(default_factory=list)
    events: Listed = field(default_factory=list)
    webhook_registered: bool | None = None  # None: could not tell
    quotas: Listed = field(default_factory=list)  # the namespace's ResourceQuotas
    # Kueue as its objects say, read for a pod it queues; None: not installed, or not queued
    kueue: Kueue | ReadError | None = None
    # The Workload of a pod Kueue's admission gate holds; None: not gated, or none yet
    workload: Obj | ReadError | None = None
    # The node autoscalers, read for a pod not yet bound (app/readers/autoscalers.py)
    autoscalers: tuple[Autoscaler, ...] | ReadError = ()
