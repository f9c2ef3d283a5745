"""`prune-templates`' output: a line per template saying what became of it and why, as
kubectl delete says it, then how many there were; or JSON."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from app.maintain.prune.fates import Fate


def render_text(fates: Sequence[Fate], *, unused: int, namespace: str | None, applied: bool) -> str:
    """`unused`: the templates found unused before any was deleted; applied, a template a pod
    took meanwhile is kept."""
    verbs = {"delete": "deleted", "keep": "kept"} if applied else {"delete": "would delete"}
    lines = [f"{verbs.get(f.action, f.action)} {f.key}: {f.why}" for f in fates]
    deleted = sum(f.action == "delete" for f in fates)
    where = "every namespace" if namespace is None else f"namespace {namespace}"
    summary = f"{len(fates)} gpu2dra template(s) in {where}, {unused} unused"
    if applied:
        lines.append(f"{summary}; {deleted} deleted")
    elif unused:
        lines.append(f"{summary}; a dry run: --apply deletes them")
    else:
        lines.append(summary)
    return "\n".join(lines) + "\n"


def render_json(fates: Sequence[Fate], *, namespace: str | None, applied: bool) -> bytes:
    """Each template's namespace, name, action (`delete`: deleted, or would be without
    --apply; `keep`) and why; the namespace (null: every one) and whether it was applied."""
    return orjson.dumps(
        {
            "namespace": namespace,
            "applied": applied,
            "templates": [
                {"namespace": f.namespace, "name": f.name, "action": f.action, "why": f.why}
                for f in fates
            ],
        },
        option=orjson.OPT_INDENT_2,
    )
