"""The floor: the least a Python webhook can do. A bare ASGI app that parses the review and
answers `allowed`, served by the same uvicorn settings as gpu2dra. With GPU2DRA_FLOOR_PATCH
set (a base64 JSONPatch) it answers that patch for every review: what the API server does
with a patch, apart from what computing it costs."""

from __future__ import annotations

import os
from typing import Any

import orjson

PATCH = os.environ.get("GPU2DRA_FLOOR_PATCH", "")
PATCHED = {"patchType": "JSONPatch", "patch": PATCH} if PATCH else {}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    uid = orjson.loads(body)["request"]["uid"]
    answer = orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": True, **PATCHED},
        }
    )
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": answer})
