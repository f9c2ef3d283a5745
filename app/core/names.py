"""Names gpu2dra gives: request and pod claim names, DNS labels that stay readable."""

from __future__ import annotations

import hashlib
import itertools
from functools import lru_cache

from app.core.kube import dns_label, is_dns_label


@lru_cache(maxsize=1024)
def request_name(resource: str) -> str:
    """`nvidia.com/mig-1g.10gb` -> `mig-1g-10gb`: a DNS label naming the request."""
    return dns_label(resource.rsplit("/", 1)[-1])


def claim_name(
    container: str, request: str, taken: set[str], salts: dict[str, int] | None = None
) -> str:
    """A pod claim name: a DNS label, unique among `taken`, readable when it fits.

    `salts` remembers, per base name, the salt after the last one returned: the caller adds
    each name it gets to `taken`, so every smaller salt is still taken, and n containers of
    one name (an invalid pod, yet one we are sent) cost n hashes, not n * n.
    """
    base = f"{container}-{request}"
    if is_dns_label(base) and base not in taken:
        return base
    stem = dns_label(base)[:56].rstrip("-")
    for salt in itertools.count(salts.get(base, 0) if salts is not None else 0):
        digest = hashlib.sha256(f"{base}/{salt}".encode()).hexdigest()[:6]
        name = f"{stem}-{digest}"
        if name not in taken:
            if salts is not None:
                salts[base] = salt + 1
            return name
    raise AssertionError("unreachable")
