"""gpu2dra as the API server meets it: a real `gpu2dra serve` process, registered through the
webhook configurations that the Helm chart renders (one source for both)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from app.core.policy import DEFAULT_POLICY_YAML
from tests.support.controlplane import ADMIN_USER, REPO_ROOT
from tests.support.ports import free_port

CHART = REPO_ROOT / "charts" / "gpu2dra"
RELEASE_NAMESPACE = "gpu2dra-system"
WEBHOOK_LOG = "webhook.log"
Obj = dict[str, Any]


def render_chart(helm: Path, *values: str, namespace: str = RELEASE_NAMESPACE) -> list[Obj]:
    """`helm template` of the chart with `--set` values, as parsed documents: what `helm
    install` creates (the `helm test` Pod is left out: only `helm test` creates it)."""
    args = [str(helm), "template", "gpu2dra", str(CHART), "--namespace", namespace, "--skip-tests"]
    for value in values:
        args += ["--set", value]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"helm template failed: {done.stderr.strip()}")
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def of_kind(docs: list[Obj], kind: str) -> Obj:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


class Webhook:
    """`python -m app serve` on loopback, with certificates from `gpu2dra certs`."""

    def __init__(
        self,
        work_dir: Path,
        kubeconfig: Path,
        helm: Path,
        in_tree: str = "translate",
        policy: Obj | None = None,
    ) -> None:
        self.work_dir, self.kubeconfig, self.helm = work_dir, kubeconfig, helm
        self.in_tree, self.overrides = in_tree, policy or {}
        self.port = free_port()
        self.certs = work_dir / "certs"
        self.log = work_dir / WEBHOOK_LOG
        self.policy = work_dir / "policy.yaml"
        self.process: subprocess.Popen[bytes] | None = None
        subprocess.run(
            [
                sys.executable,
                "-m",
                "app",
                "certs",
                "--service",
                "gpu2dra",
                "--namespace",
                RELEASE_NAMESPACE,
                "--dns",
                "localhost",
                "--ip",
                "127.0.0.1",
                "--out",
                str(self.certs),
            ],
            check=True,
            cwd=REPO_ROOT,
            capture_output=True,
        )

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode((self.certs / "ca.crt").read_bytes()).decode()

    def rendered(self, *values: str) -> list[Obj]:
        """The chart's objects for a webhook reached at this process's URL."""
        return render_chart(
            self.helm,
            f"webhook.url={self.url}",
            "tls.mode=secret",
            "tls.secretName=unused",
            f"tls.caBundle={self.ca_bundle}",
            *values,
        )

    def start(
        self, *args: str, wait_for: str = "/readyz", timeout: float = 60, module: str = "app"
    ) -> None:
        """Run `gpu2dra serve` with the chart's policy, nvidia.com/gpu's inTree set to
        `self.in_tree` (see in_tree_policy), the fields of `self.overrides` over both, and
        `args`, as `python -m module` (another module that ends in app's CLI:
        tests/e2e/faulty_serve.py); wait until `wait_for` answers 200. The policy it runs is
        `self.policy`, for the commands to judge by the same."""
        policy = yaml.safe_load(of_kind(self.rendered(), "ConfigMap")["data"]["policy.yaml"]) or {}
        policy = {**policy, **in_tree_policy(self.in_tree), **self.overrides}
        self.policy.write_text(yaml.safe_dump(policy))
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        command = [
            sys.executable,
            "-m",
            module,
            "serve",
            "--port",
            str(self.port),
            "--cert",
            str(self.certs / "tls.crt"),
            "--key",
            str(self.certs / "tls.key"),
            "--policy",
            str(self.policy),
            "--namespace",
            RELEASE_NAMESPACE,
            # It runs with the admin kubeconfig: that is the identity its templates come from.
            "--template-writer",
            ADMIN_USER,
            *args,
        ]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"gpu2dra exited: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(urllib.error.URLError, OSError):
                if self.get(wait_for)[0] == 200:
                    return
            time.sleep(0.2)
        raise AssertionError(f"gpu2dra not ready in {timeout}s: {self.log.read_text()[-2000:]}")

    @property
    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.certs / "ca.crt"))

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"{self.url}{path}", context=self.context, timeout=5) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def post(self, path: str, body: Obj, timeout: float = 10) -> tuple[int, Obj]:
        """POST JSON to the webhook as the API server would; the status and the answer."""
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, context=self.context, timeout=timeout) as r:
            return r.status, json.loads(r.read())

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples named `name` whose labels include `labels` (GET /metrics)."""
        status, body = self.get("/metrics")
        assert status == 200, body
        return sum(
            sample.value
            for family in text_string_to_metric_families(body.decode())
            for sample in family.samples
            if sample.name == name and labels.items() <= sample.labels.items()
        )

    def dry_run(self, namespace: str, pod: Obj) -> Obj:
        """The webhook's answer to a dry-run CREATE of `pod` in `namespace`: nothing created."""
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "probe",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "operation": "CREATE",
                "namespace": namespace,
                "object": pod,
                "dryRun": True,
            },
        }
        response: Obj = self.post("/mutate", review)[1]["response"]
        return response

    def set_mode(self, api: client.ApiClient, namespace: str, mode: str | None) -> None:
        """Label the namespace and wait until this webhook's cache has seen the label."""
        client.CoreV1Api(api).patch_namespace(
            namespace, {"metadata": {"labels": {"gpu2dra.io/migration": mode}}}
        )
        # An init container asking too: translated even where gpu2dra defers plain pods to
        # the in-tree path (it would give the init container devices of its own).
        gpu = {"resources": {"limits": {"nvidia.com/gpu": 1}}}
        pod = {
            "spec": {"containers": [{"name": "c", **gpu}], "initContainers": [{"name": "i", **gpu}]}
        }
        expected = {"enabled": "patch", "audit": "auditAnnotations"}.get(mode or "")
        deadline = time.monotonic() + 30
        while True:
            response = self.dry_run(namespace, pod)
            seen = [key for key in ("patch", "auditAnnotations") if key in response]
            if seen == ([expected] if expected else []):
                return
            assert time.monotonic() < deadline, f"gpu2dra never saw {namespace} as {mode}"
            time.sleep(0.1)

    def stop(self) -> int | None:
        if self.process is None:
            return None
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.process = None
        return code


def register(api: client.ApiClient, docs: list[Obj]) -> None:
    """Create (or replace) the webhook configurations among `docs`."""
    admission = client.AdmissionregistrationV1Api(api)
    calls = {
        "MutatingWebhookConfiguration": (
            admission.create_mutating_webhook_configuration,
            admission.replace_mutating_webhook_configuration,
        ),
        "ValidatingWebhookConfiguration": (
            admission.create_validating_webhook_configuration,
            admission.replace_validating_webhook_configuration,
        ),
    }
    for doc in docs:
        if doc["kind"] not in calls:
            continue
        create, replace = calls[doc["kind"]]
        try:
            create(doc)
        except ApiException as err:
            if err.status != 409:
                raise
            current = read_webhook_configuration(api, doc["kind"], doc["metadata"]["name"])
            doc = {
                **doc,
                "metadata": {
                    **doc["metadata"],
                    "resourceVersion": current["metadata"]["resourceVersion"],
                },
            }
            replace(doc["metadata"]["name"], doc)


def read_webhook_configuration(api: client.ApiClient, kind: str, name: str) -> Obj:
    admission = client.AdmissionregistrationV1Api(api)
    read = (
        admission.read_mutating_webhook_configuration
        if kind == "MutatingWebhookConfiguration"
        else admission.read_validating_webhook_configuration
    )
    return api.sanitize_for_serialization(read(name))  # type: ignore[no-any-return]


def unregister(api: client.ApiClient, name: str = "gpu2dra") -> None:
    """Delete the webhook configurations named `name` (absent is fine)."""
    admission = client.AdmissionregistrationV1Api(api)
    for delete in (
        admission.delete_mutating_webhook_configuration,
        admission.delete_validating_webhook_configuration,
    ):
        try:
            delete(name)
        except ApiException as err:
            if err.status != 404:
                raise


def in_tree_policy(choice: str) -> Obj:
    """The default policy's mappings with nvidia.com/gpu's `inTree` set to `choice`.

    The suite's clusters have the driver chart's classes, so on 1.36+ `gpu.nvidia.com` serves
    nvidia.com/gpu in-tree, and the default `defer` would leave every plain GPU pod to the
    scheduler. The e2e webhook therefore runs with `translate`, as a cluster does that wants
    gpu2dra to serve every pod (its tests are of gpu2dra's translation); tests/e2e/
    test_in_tree.py runs the default, `defer`."""
    mappings = yaml.safe_load(DEFAULT_POLICY_YAML)["mappings"]
    mappings["nvidia.com/gpu"]["inTree"] = choice
    return {"mappings": mappings}


def in_tree_values(choice: str) -> list[str]:
    """The `helm install` arguments that give the chart's pods in_tree_policy(choice)."""
    return ["--set-json", f"policy.mappings={json.dumps(in_tree_policy(choice)['mappings'])}"]


# Time-sliced and MPS GPUs, and HAMi's memory fractions, moved onto the driver's shares.
SHARING_POLICY: Obj = {
    "mappings": {
        "nvidia.com/gpu": {
            "deviceClassName": "gpu.nvidia.com",
            "consumable": {"shares": 1, "memory": "nvidia.com/gpumem"},
        }
    }
}


def running_webhook(
    plane: Any,
    api: client.ApiClient,
    work_dir: Path,
    in_tree: str = "translate",
    policy: Obj | None = None,
) -> Iterator[Webhook]:
    """gpu2dra serving and registered by URL (Webhook's in_tree and policy); unregistered
    afterwards, so that later modules (the Helm tests) can install a release of the same
    name."""
    from tests.support.cluster import create_nvidia_device_classes, publish_elsewhere

    create_nvidia_device_classes(api)
    publish_elsewhere(api)
    hook = Webhook(work_dir, plane.kubeconfig, plane.helm, in_tree, policy)
    hook.start()
    register(api, hook.rendered())
    try:
        yield hook
    finally:
        unregister(api)
        assert hook.stop() in (0, None), "SIGTERM must end the webhook cleanly"
