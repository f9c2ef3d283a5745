"""Names and limits of the Kubernetes APIs gpu2dra reads and writes.

Objects stay plain dicts (JSON as received); these aliases only document intent.
"""

import re
from typing import Any

Obj = dict[str, Any]
# A location in an object: its keys and list indexes, from the top (`("spec", "containers", 0)`).
Path = tuple[str | int, ...]

# The label on everything gpu2dra generates (templates, DeviceClasses, ResourceQuotas).
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu2dra"}

RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_API_VERSION = f"{RESOURCE_GROUP}/v1"

# AllocationResultsMaxSize: a claim can be allocated at most this many devices. A larger
# count passes validation but never schedules, so such a request is not translated.
MAX_DEVICES_PER_CLAIM = 32

DNS_LABEL_MAX = 63
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def is_dns_label(value: str) -> bool:
    return len(value) <= DNS_LABEL_MAX and _DNS_LABEL.fullmatch(value) is not None


def dns_label(text: str) -> str:
    """Lower-case `text` and squeeze everything that is not [a-z0-9] into single dashes."""
    label = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return label[:DNS_LABEL_MAX].rstrip("-") or "x"


def cel_expressions(selectors: Any) -> tuple[str, ...]:
    """The CEL expressions of a `selectors` list, a request's or a DeviceClass's."""
    return tuple(
        str(s["cel"]["expression"])
        for s in (selectors if isinstance(selectors, list) else ())
        if isinstance(s, dict) and isinstance(s.get("cel"), dict) and "expression" in s["cel"]
    )


def command_words(container: Obj) -> list[str]:
    """A container's command and args, as its process gets them."""
    return [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]


def flag_values(words: list[str], name: str, *, boolean: bool = False) -> list[str]:
    """Every value of the flag `name` on a command line, in order: `--name=v`, `--name v`
    (or one dash, as Go's flag package reads them); a bare boolean flag is "true", since a
    boolean takes its value only after `=`."""
    found = []
    for i, word in enumerate(words):
        if word.startswith((f"--{name}=", f"-{name}=")):
            found.append(word.split("=", 1)[1])
        elif word in (f"--{name}", f"-{name}"):
            if boolean:
                found.append("true")
            elif i + 1 < len(words):
                found.append(words[i + 1])
    return found
