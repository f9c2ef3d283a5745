"""A translation as a JSON patch of only the subtrees it replaced, the record of what those
subtrees held before, and the patch that keeps a re-applied manifest from undoing it.

`kubectl apply` of the manifest a pod was created from (client-side or server-side) puts back
what gpu2dra moved to DRA: `nvidia.com/gpu` in a container's resources, GFD node terms. A pod
spec is immutable, so the API server would refuse that update, and a GitOps tool would see
drift forever. The pod records the replaced subtrees in an annotation; an update that only
brings back what they held is patched back to the live pod, which makes it a no-op.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import orjson

from app.core.kube import Obj, Path
from app.core.translate import Translation

# JSON of {JSON pointer: what the pod spec held there before translation, null if nothing}
RECORD_ANNOTATION = "gpu2dra.io/translated-from"
_RECORD_POINTER = "/metadata/annotations/" + RECORD_ANNOTATION.replace("/", "~1")
# The API server's limit on the sum of a object's annotation keys and values (bytes).
ANNOTATIONS_LIMIT = 256 * 1024

_MISSING: Any = object()


def at(obj: Any, path: Path) -> Any:
    """The value at `path`, or _MISSING."""
    for step in path:
        try:
            obj = obj[step]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return obj


@lru_cache(maxsize=256)  # a handful of paths: the first containers, resourceClaims, ...
def pointer(path: Path) -> str:
    return "/spec/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)


def patch_ops(spec: Obj, translation: Translation) -> list[Obj]:
    """JSON patch for the subtrees the translation replaced: no whole-pod diff."""
    ops: list[Obj] = []
    for path in translation.touched:
        old, new = at(spec, path), at(translation.spec, path)
        if new is _MISSING:
            ops.append({"op": "remove", "path": pointer(path)})
        else:
            op = "add" if old is _MISSING else "replace"
            ops.append({"op": op, "path": pointer(path), "value": new})
    return ops


def record(spec: Obj, touched: tuple[Path, ...]) -> str:
    """The annotation's value: what each replaced subtree held before."""
    before = {pointer(p): (None if (v := at(spec, p)) is _MISSING else v) for p in touched}
    return orjson.dumps(before).decode()


def record_ops(value: str, annotated: bool) -> list[Obj]:
    """Patch ops adding the record to a pod whose metadata has an annotations map or not."""
    if annotated:
        return [{"op": "add", "path": _RECORD_POINTER, "value": value}]
    return [{"op": "add", "path": "/metadata/annotations", "value": {RECORD_ANNOTATION: value}}]


def annotations_size(annotations: dict[str, Any]) -> int:
    """Bytes the API server counts against ANNOTATIONS_LIMIT (as it does: keys and values)."""
    size = 0
    for k, v in annotations.items():  # not sum(): every pod pays it (docs/performance.md)
        if isinstance(v, str):
            size += len(k) + len(v)
    if size * 4 < ANNOTATIONS_LIMIT:  # no UTF-8 character is over 4 bytes: surely fits
        return size
    return sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items())


def _from_either(new: Any, live: Any, before: Any) -> bool:
    """`new` holds nothing but what the live pod or the pre-translation spec held there."""
    if new in (live, before):
        return True
    if isinstance(new, dict):
        lives = live if isinstance(live, dict) else {}
        befores = before if isinstance(before, dict) else {}
        # key by key: a merge of the two (kubectl's three-way patch makes one)
        return all(
            (k in lives or k in befores)
            and _from_either(v, lives.get(k, _MISSING), befores.get(k, _MISSING))
            for k, v in new.items()
        )
    if isinstance(new, list):
        items = [
            *(live if isinstance(live, list) else ()),
            *(before if isinstance(before, list) else ()),
        ]
        return all(item in items for item in new)
    return False


def revert_ops(old: Obj, new: Obj) -> list[Obj] | None:
    """For an UPDATE of a translated pod: the ops that put back the translation where the
    update only brings back what it replaced (a re-applied manifest); None when the update
    changes nothing gpu2dra wrote, or changes it into something else (left to the API server,
    which refuses a pod spec change)."""
    value = _annotations(old).get(RECORD_ANNOTATION)
    if not isinstance(value, str):
        return None
    try:
        recorded = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    old_spec, new_spec = old.get("spec"), new.get("spec")
    if not (isinstance(recorded, dict) and isinstance(old_spec, dict)):
        return None
    if not isinstance(new_spec, dict) or new_spec == old_spec:
        return None
    ops: list[Obj] = []
    for where, before in recorded.items():
        path = _path(where)
        if path is None:
            return None
        live, now = at(old_spec, path), at(new_spec, path)
        if now == live:
            continue
        if now is not _MISSING and not _from_either(now, live, before):
            return None
        if live is _MISSING:
            ops.append({"op": "remove", "path": where})
        else:
            ops.append(
                {"op": "add" if now is _MISSING else "replace", "path": where, "value": live}
            )
    if not ops:
        return None
    metadata = new.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if isinstance(metadata, dict) and RECORD_ANNOTATION not in _annotations(new):
        # server-side apply drops it
        ops += record_ops(value, isinstance(annotations, dict))
    return ops


def _annotations(obj: Obj) -> dict[str, Any]:
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return annotations if isinstance(annotations, dict) else {}


def _path(where: Any) -> Path | None:
    """A recorded pointer back to a path under the spec (indices as ints); None if not one."""
    if not isinstance(where, str) or not where.startswith("/spec/"):
        return None
    steps = [s.replace("~1", "/").replace("~0", "~") for s in where[len("/spec/") :].split("/")]
    return tuple(int(s) if s.isdigit() else s for s in steps)
