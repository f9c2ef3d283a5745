"""`gpu2dra translate` as a KRM function (the KRM Functions Specification: kustomize's exec and
container functions, kpt): a ResourceList in, the same ResourceList out, its items translated,
the ResourceClaimTemplates they need added among them, and what there is to say in `results`,
each naming its item. The translation is `translate`'s own (documents.py); only the framing is
here. docs/getting-started/gitops.md#kustomize-krm-function says how it is used."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple, NotRequired, TypedDict

import orjson
import yaml

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.mapping import PolicyError
from app.core.outcomes import Kind
from app.core.policy import MODES, Mode, Policy, parse_policy
from app.manifests import yamlwrite
from app.manifests.documents import (
    ManifestError,
    Note,
    is_list,
    load_documents,
    translate_documents,
)
from app.manifests.tally import Tally, tally

API_VERSIONS = ("config.kubernetes.io/v1", "config.kubernetes.io/v1beta1")
KIND = "ResourceList"
# Cheap enough to ask of every input before reading it whole: only then is it parsed twice.
_MAYBE = re.compile(r"""["']?kind["']?\s*:\s*["']?ResourceList\b""")
# What a functionConfig's `data` may set (a ConfigMap's data: strings).
SETTINGS = ("namespace", "mode", "strict", "policy")
PATH_ANNOTATIONS = ("internal.config.kubernetes.io/path", "config.kubernetes.io/path")
INDEX_ANNOTATIONS = ("internal.config.kubernetes.io/index", "config.kubernetes.io/index")
CODE_TAG = "gpu2dra.io/code"  # a result's outcome code (docs/reference/outcomes.md)

# Exit statuses: as `gpu2dra translate`'s (docs/reference/cli.md).
FAILED = 1  # an item or the functionConfig cannot be read: an error result says which
LEFT = 3  # strict: an item whose pods ask for GPUs is left as is

Severity = Literal["error", "warning", "info"]
# Left on the device plugin, or translated with something to know: a warning; a note: info.
SEVERITY: dict[Kind, Severity] = {"left": "warning", "translated": "warning", "note": "info"}


class ResourceRef(TypedDict):
    apiVersion: str
    kind: str
    name: str
    namespace: NotRequired[str]


class FileRef(TypedDict):
    path: str
    index: NotRequired[int]


class Result(TypedDict):
    """One entry of a ResourceList's `results`, as the specification's schema has it."""

    message: str
    severity: Severity
    resourceRef: NotRequired[ResourceRef]
    file: NotRequired[FileRef]
    tags: NotRequired[dict[str, str]]


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What a run translates with: the command line's, then what functionConfig sets."""

    policy: Policy
    namespace: str | None
    mode: Mode
    strict: bool


class Answer(NamedTuple):
    """The ResourceList to write, the exit status, and the lines for stderr."""

    body: bytes
    status: int
    said: list[str]


def read_resource_list(text: str) -> Obj | None:
    """The ResourceList `text` holds, or None when it holds anything else (manifests, which
    `translate` writes as a stream). ManifestError when it cannot be read at all."""
    if not _MAYBE.search(text):
        return None
    docs = load_documents(text)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        return None
    doc: Obj = docs[0]
    return doc if doc.get("kind") == KIND and doc.get("apiVersion") in API_VERSIONS else None


def settings_of(function_config: Any, given: Settings) -> Settings:
    """`given` with what functionConfig's `data` sets (a ConfigMap, or any kind with `data`):
    namespace, mode, strict ("true"/"false") and policy (a policy's YAML). PolicyError names
    what is wrong: an unknown key is refused, not ignored."""
    if function_config is None:
        return given
    if not isinstance(function_config, dict):
        raise PolicyError("functionConfig is not an object")
    if "spec" in function_config:
        raise PolicyError("functionConfig: gpu2dra reads data (as a ConfigMap holds it), not spec")
    data = function_config.get("data") or {}
    if not isinstance(data, dict):
        raise PolicyError("functionConfig.data is not a mapping")
    if unknown := sorted(set(data) - set(SETTINGS)):
        raise PolicyError(
            f"functionConfig.data: unknown {', '.join(map(str, unknown))} "
            f"(gpu2dra reads {', '.join(SETTINGS)})"
        )
    for key, value in data.items():
        if not isinstance(value, str):
            raise PolicyError(f"functionConfig.data.{key} is not a string")
    out = given
    if "namespace" in data:
        out = replace(out, namespace=data["namespace"] or None)
    if "mode" in data:
        if data["mode"] not in MODES:
            raise PolicyError(f"functionConfig.data.mode must be one of {', '.join(MODES)}")
        out = replace(out, mode=data["mode"])
    if "strict" in data:
        if data["strict"] not in ("true", "false"):
            raise PolicyError('functionConfig.data.strict must be "true" or "false"')
        out = replace(out, strict=data["strict"] == "true")
    if "policy" in data:
        try:
            raw = yaml.safe_load(data["policy"])
        except yaml.YAMLError as err:
            raise PolicyError(f"functionConfig.data.policy: not valid YAML: {err}") from None
        try:
            out = replace(out, policy=parse_policy(raw))
        except PolicyError as err:
            raise PolicyError(f"functionConfig.data.policy: {err}") from None
    return out


def run(resource_list: Obj, given: Settings, catalog: Catalog, *, as_json: bool) -> Answer:
    """The ResourceList answering `resource_list`: its items translated in place, then each
    template they need that is not among them yet; a result per warning, naming its item.
    An item or a functionConfig that cannot be read gives an error result, the items as they
    came, and exit status 1; with strict, an item left as is though its pods ask for GPUs
    gives one, and exit status 3. `catalog`: the command line's policy's DeviceClasses (a
    functionConfig's policy brings its own)."""
    items = resource_list.get("items")
    if items is None:
        items = []
    if not isinstance(items, list):
        return _failed(resource_list, [], "items is not a list", as_json=as_json)
    try:
        settings = settings_of(resource_list.get("functionConfig"), given)
    except PolicyError as err:
        return _failed(resource_list, items, str(err), as_json=as_json)
    if settings.policy is not given.policy:
        catalog = Catalog.of(settings.policy.device_classes)
    try:
        done = translate_documents(
            items,
            settings.policy,
            catalog,
            namespace=settings.namespace,
            mode=settings.mode,
            offline=True,
        )
    except ManifestError as err:
        return _failed(resource_list, items, f"items: {err}", as_json=as_json)
    held = {_identity(item) for item in _flat(items)}
    added = [t for t in done.templates.values() if _identity(t) not in held]
    notes: dict[int, list[Note]] = {}
    for note in done.notes:
        notes.setdefault(note.document, []).append(note)
    results: list[Result] = []
    counted = Tally()
    for number, (before, after) in enumerate(
        zip(_flat(items), _flat(done.documents), strict=True), 1
    ):
        mine = notes.get(number, [])
        one = tally([before], [after], [n._replace(document=1) for n in mine], settings.policy)
        counted.add(one)
        # A note on an item left as is though its pods ask for GPUs is worth a warning.
        results.extend(_result(note, before, left=bool(one.left)) for note in mine)
        if settings.strict and one.left:
            why = ", ".join(sorted(one.reasons))
            text = f"left as is though its pods ask for GPUs ({why}); strict fails on it"
            results.append(_refer({"message": text, "severity": "error"}, before))
    said = [f"warning: {note}" for note in done.notes]
    status = 0
    if settings.strict:
        said.append(f"gpu2dra: {counted}")
        status = LEFT if counted.left else 0
    earlier = resource_list.get("results")
    if isinstance(earlier, list):  # an earlier function's, kept before this one's
        results = [*earlier, *results]
    answer = {**resource_list, "items": [*done.documents, *added], "results": results}
    return Answer(_write(answer, as_json=as_json), status, said)


def _failed(resource_list: Obj, items: list[Any], message: str, *, as_json: bool) -> Answer:
    result: Result = {"message": message, "severity": "error"}
    answer = {**resource_list, "items": items, "results": [result]}
    return Answer(_write(answer, as_json=as_json), FAILED, [f"gpu2dra: {message}"])


def _flat(items: list[Any]) -> list[Any]:
    """The items as translate_documents numbers them: a List's items each."""
    return [i for item in items for i in (item["items"] if is_list(item) else [item])]


def _identity(item: Any) -> tuple[Any, ...]:
    if not isinstance(item, dict):
        return ()
    metadata = _metadata(item)
    return (
        item.get("apiVersion"),
        item.get("kind"),
        metadata.get("namespace"),
        metadata.get("name"),
    )


def _metadata(item: Obj) -> Obj:
    metadata = item.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _result(note: Note, item: Any, *, left: bool) -> Result:
    code = note.text.code
    severity: Severity = "warning" if left else SEVERITY[code.kind]
    result = _refer({"message": str(note.text), "severity": severity}, item)
    if "resourceRef" not in result:  # no name to refer by: the message says which
        result["message"] = str(note)
    result["tags"] = {CODE_TAG: str(code)}
    return result


def _refer(result: Result, item: Any) -> Result:
    """`result` naming `item` (apiVersion, kind, name, namespace) and the file it was read
    from, as the orchestrator's annotations say, when the item has them."""
    if not isinstance(item, dict):
        return result
    metadata = _metadata(item)
    api_version, kind, name = item.get("apiVersion"), item.get("kind"), metadata.get("name")
    if isinstance(api_version, str) and isinstance(kind, str) and isinstance(name, str):
        ref: ResourceRef = {"apiVersion": api_version, "kind": kind, "name": name}
        if isinstance(namespace := metadata.get("namespace"), str):
            ref["namespace"] = namespace
        result["resourceRef"] = ref
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict):
        return result
    path = next((annotations[a] for a in PATH_ANNOTATIONS if a in annotations), None)
    if isinstance(path, str):
        where: FileRef = {"path": path}
        index = next((annotations[a] for a in INDEX_ANNOTATIONS if a in annotations), None)
        if isinstance(index, str) and index.isdigit():
            where["index"] = int(index)
        result["file"] = where
    return result


def _write(answer: Obj, *, as_json: bool) -> bytes:
    if as_json:
        return orjson.dumps(answer) + b"\n"
    return yamlwrite.dump(answer).encode()
