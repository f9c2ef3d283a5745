"""The one way gpu2dra finds its cluster: a kubeconfig or the pod's service account, and the
namespace a kubeconfig's context names.

The webhook prefers its service account (it runs in the cluster); the commands for a running
cluster prefer the kubeconfig (they run on a laptop). Every call made through the client is
bounded by its own deadline, so the client retries nothing behind the caller's back.
"""

from __future__ import annotations

from pathlib import Path

from kubernetes import client, config


class NoCluster(Exception):
    """Neither a usable kubeconfig nor a service account; the message is one line."""


def first_line(err: BaseException) -> str:
    """An error's message in one line (its first), or its type's name when it has none."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def api_client(
    kubeconfig: Path | None = None, *, in_cluster_first: bool = False
) -> client.ApiClient:
    """A client for `kubeconfig` (else $KUBECONFIG or ~/.kube/config) or the service account,
    in the order asked for; NoCluster when neither can be used."""
    if kubeconfig is not None and not kubeconfig.is_file():
        raise NoCluster(f"kubeconfig {kubeconfig}: no such file")
    configuration = client.Configuration()

    def from_kubeconfig() -> None:
        # The loader raises YAML, key and value errors as well as its own.
        try:
            config.load_kube_config(
                config_file=str(kubeconfig) if kubeconfig else None,
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
        if kubeconfig is not None and first is from_kubeconfig:
            raise  # a file named explicitly must work
        try:
            second()
        except NoCluster:
            raise err from None
    configuration.retries = False
    return client.ApiClient(configuration)


def context_namespace(kubeconfig: Path | None = None) -> str:
    """The kubeconfig context's namespace, like kubectl; `default` without one."""
    try:
        _, context = config.list_kube_config_contexts(
            config_file=str(kubeconfig) if kubeconfig else None
        )
    except Exception:  # YAML, key and value errors too: connecting says what is wrong with it
        return "default"
    return str((context or {}).get("context", {}).get("namespace") or "default")
