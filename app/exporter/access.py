"""Who may read the exporter's /metrics under `--secure-metrics`: the bearer token's identity
from a TokenReview, then its right to `get` the non-resource URL /metrics from a
SubjectAccessReview, as kube-rbac-proxy and controller-runtime's metrics filter decide it.

A caller cannot make the exporter call the API server faster than this allows: answers are
remembered by the token's SHA-256 (an allowed one for two minutes, a refused one for ten
seconds, 1,024 at most), at most four reviews run at once (the next caller gets 429), and a
header longer than any service-account token is refused without a review. An API server that
cannot answer gives 503, remembered for nobody.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes import client

log = logging.getLogger(__name__)

MAX_HEADER = 16 * 1024  # a projected service-account token is about 1 KiB


@dataclass(frozen=True)
class Answer:
    status: int  # 200, 401, 403, 429 or 503
    reason: str


class Access:
    def __init__(
        self,
        api: client.ApiClient,
        *,
        path: str = "/metrics",
        allowed_for: float = 120.0,
        refused_for: float = 10.0,
        size: int = 1024,
        concurrent: int = 4,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._authn = client.AuthenticationV1Api(api)
        self._authz = client.AuthorizationV1Api(api)
        self._path = path
        self._allowed_for, self._refused_for = allowed_for, refused_for
        self._size = size
        self._reviews = threading.BoundedSemaphore(concurrent)
        self._timeout = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._answers: OrderedDict[bytes, tuple[float, Answer]] = OrderedDict()

    def check(self, authorization: str | None) -> Answer:
        """The answer for one request's Authorization header."""
        if not authorization or len(authorization) > MAX_HEADER:
            return Answer(401, "a bearer token is required")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Answer(401, "a bearer token is required")
        key = hashlib.sha256(token.encode()).digest()
        now = self._clock()
        with self._lock:
            remembered = self._answers.get(key)
            if remembered and remembered[0] > now:
                return remembered[1]
        if not self._reviews.acquire(blocking=False):
            return Answer(429, "too many reviews in flight")
        try:
            answer = self._review(token)
        except Exception as err:  # the API server's fault is not the caller's
            log.warning("metrics access review failed: %s", err)
            return Answer(503, "the API server did not answer the access review")
        finally:
            self._reviews.release()
        ttl = self._allowed_for if answer.status == 200 else self._refused_for
        with self._lock:
            self._answers[key] = (now + ttl, answer)
            self._answers.move_to_end(key)
            while len(self._answers) > self._size:
                self._answers.popitem(last=False)
        return answer

    def _review(self, token: str) -> Answer:
        review = self._authn.create_token_review(
            client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token)),
            _request_timeout=self._timeout,
        )
        status = review.status
        if status is None or not status.authenticated or status.user is None:
            return Answer(401, "the token is not valid")
        user = status.user
        access = self._authz.create_subject_access_review(
            client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(
                    user=user.username,
                    groups=user.groups,
                    uid=user.uid,
                    extra=user.extra,
                    non_resource_attributes=client.V1NonResourceAttributes(
                        path=self._path, verb="get"
                    ),
                )
            ),
            _request_timeout=self._timeout,
        )
        if access.status is not None and access.status.allowed:
            return Answer(200, "allowed")
        return Answer(403, f"{user.username} may not get {self._path}")
