"""The one way gpu2dra finds its cluster: a kubeconfig (and a context in it) or the pod's
service account, and the namespace a kubeconfig's context names.

The webhook prefers its service account (it runs in the cluster); the commands for a running
cluster prefer the kubeconfig (they run on a laptop). Every call made through the client is
bounded by its own deadline, so the client retries nothing behind the caller's back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kubernetes import client, config


class NoCluster(Exception):
    """Neither a usable kubeconfig nor a service account; the message is one line."""


@dataclass(frozen=True, slots=True)
class Kubeconfig:
    """The kubeconfig a command for a running cluster reads and the context it uses, as
    kubectl's --kubeconfig and --context choose them. `path` None: $KUBECONFIG, else
    ~/.kube/config (else the pod's service account); `context` None: the file's current one."""

    path: Path | None = None
    context: str | None = None


def first_line(err: BaseException) -> str:
    """An error's message in one line (its first), or its type's name when it has none."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def api_client(
    kubeconfig: Path | None = None,
    *,
    context: str | None = None,
    in_cluster_first: bool = False,
) -> client.ApiClient:
    """A client for `kubeconfig` (else $KUBECONFIG or ~/.kube/config), its `context` (else its
    current one), or the service account, in the order asked for; NoCluster when neither can
    be used. A context named must be in the kubeconfig."""
    if kubeconfig is not None and not kubeconfig.is_file():
        raise NoCluster(f"kubeconfig {kubeconfig}: no such file")
    configuration = client.Configuration()

    def from_kubeconfig() -> None:
        # The loader raises YAML, key and value errors as well as its own.
        known = contexts(kubeconfig)  # none when unreadable: then the loader says why
        if context is not None and known and context not in known:
            where = f"kubeconfig {kubeconfig}" if kubeconfig else "the kubeconfig"
            raise NoCluster(f"{where} has no context named {context!r}")
        try:
            config.load_kube_config(
                config_file=str(kubeconfig) if kubeconfig else None,
                context=context,
                client_configuration=configuration,
            )
        except Exception as err:
            where = f"kubeconfig {kubeconfig}" if kubeconfig else "no usable kubeconfig"
            raise NoCluster(f"{where}: {first_line(err)}") from None

    def from_service_account() -> None:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException as err:
            raise NoCluster(f"no service account: {first_line(err)}") from None

    first, second = from_kubeconfig, from_service_account
    if in_cluster_first:
        first, second = second, first
    try:
        first()
    except NoCluster as err:
        if (kubeconfig is not None or context is not None) and first is from_kubeconfig:
            raise  # a file or context named explicitly must work
        try:
            second()
        except NoCluster:
            raise err from None
    configuration.retries = False
    return client.ApiClient(configuration)


def contexts(kubeconfig: Path | None = None) -> dict[str, dict[str, object]]:
    """The kubeconfig's contexts by name; none when it cannot be read (connecting says why)."""
    try:
        found, _ = config.list_kube_config_contexts(
            config_file=str(kubeconfig) if kubeconfig else None
        )
    except Exception:  # YAML, key and value errors too
        return {}
    return {
        str(c["name"]): c.get("context") or {}
        for c in found or ()
        if isinstance(c, dict) and c.get("name")
    }


def context_namespace(kubeconfig: Kubeconfig = Kubeconfig()) -> str:
    """The namespace of the kubeconfig's context (the one named, else its current one), like
    kubectl; `default` without one."""
    if kubeconfig.context is not None:
        chosen = contexts(kubeconfig.path).get(kubeconfig.context) or {}
    else:
        try:
            _, current = config.list_kube_config_contexts(
                config_file=str(kubeconfig.path) if kubeconfig.path else None
            )
        except Exception:  # YAML, key and value errors too: connecting says what is wrong
            return "default"
        chosen = (current or {}).get("context") or {}
    return str(chosen.get("namespace") or "default")
