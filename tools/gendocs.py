"""The generated references in docs/reference/: the command line, from gpu2dra's own argument
parser; the policy file, from its embedded default and the chart's schema; the outcome codes,
from app/core/outcomes.py. tests/unit/test_docs.py regenerates them in memory and fails when a
file in the tree differs.

    python -m tools.gendocs           # exit 1 naming each stale file
    python -m tools.gendocs --write   # regenerate them
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, get_args

from app.cli import arguments
from app.core import mapping, policy
from app.core.outcomes import Code

ROOT = Path(__file__).resolve().parents[1]
REGENERATE = "python -m tools.gendocs --write"
WIDTH = 100  # usage lines wrap here, whatever the terminal
SCHEMA = ROOT / "charts" / "gpu2dra" / "values.schema.json"


def _banner(source: str) -> str:
    return (
        f"<!-- Generated from {source} by `{REGENERATE}`; do not edit by hand: "
        "tests/unit/test_docs.py fails when this file is stale. -->\n"
    )


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# ---- the command line --------------------------------------------------------------------


def _subcommands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, "")
    return formatter.format_help().strip()


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices:
        return " \\| ".join(f"`{c}`" for c in action.choices)
    return f"`{action.metavar or action.dest.upper()}`"


def _default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    if action.nargs == 0 or action.default is None or action.default == []:
        return ""
    return f"`{action.default}`"


def _options(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| argument | value | default | what it does |", "| --- | --- | --- | --- |"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
        help_text = _cell(action.help or "")
        rows.append(f"| {name} | {_value(action)} | {_default(action)} | {help_text} |")
    return rows


# What the commands share, as kubectl does it.
HABITS = [
    "As kubectl: every command that reads a cluster takes `--kubeconfig FILE` (default "
    "`$KUBECONFIG`, else `~/.kube/config`) and `--context NAME` (default: the kubeconfig's "
    "current context); `-n` defaults to that context's namespace, else `default`, and `-A` "
    "means every namespace where a command takes it. `translate` reads no kubeconfig: a "
    "document without a namespace, and the templates it needs, stay without one, so that "
    "`kubectl apply` puts them where it puts the rest.",
    "",
    "`-o json` and `-o yaml` print the same fields; where a command prints tables (`report`, "
    "`capacity`), `-o wide` adds the columns left out by default (each command's `-o` says "
    "which) and `--no-headers` drops the header lines. `prune-templates` says what it does a "
    "line a template, as `kubectl delete` does: no table.",
    "",
    "`gpu2dra` with no arguments and its stdin not a terminal is `gpu2dra translate` (the "
    "default policy, stdin to stdout), as Helm 3 runs `--post-renderer gpu2dra`; at a "
    "terminal it says how it is used.",
]


def cli_reference() -> str:
    parser = arguments.parser()
    out = [
        _banner("the argument parser in app/cli/arguments.py"),
        "# Command line reference",
        "",
        f"`gpu2dra`: {parser.description} `python -m app` is the "
        "same program. Every subcommand and every argument with its help, as `gpu2dra "
        "<command> --help` prints them. A cluster that cannot be reached, a missing "
        "kubeconfig, a bad policy or manifest is one line on stderr and exit status 1; a bad "
        "argument is a usage error, exit status 2; `translate --strict` and `explain` also "
        "exit 3, as their sections say.",
        "",
        *HABITS,
        "",
        "| command | what it does |",
        "| --- | --- |",
    ]
    subs = list(_subcommands(parser))
    out += [f"| [`{name}`](#gpu2dra-{name}) | {_cell(text)} |" for name, text, _ in subs]
    for name, text, sub in subs:
        out += ["", f"## gpu2dra {name}", "", f"{text[:1].upper()}{text[1:]}.", ""]
        out += ["```", _usage(sub), "```", ""]
        out += _options(sub)
        if sub.epilog:
            out += ["", sub.epilog]
        for nested, said, inner in _subcommands(sub):  # `nodes plan`, `nodes convert`
            out += ["", f"### gpu2dra {name} {nested}", "", f"{said[:1].upper()}{said[1:]}.", ""]
            out += ["```", _usage(inner), "```", ""]
            out += _options(inner)
            if inner.epilog:
                out += ["", inner.epilog]
    return "\n".join(out) + "\n"


# ---- the policy file ---------------------------------------------------------------------

# What each field means; the values and defaults come from app/core/policy.py.
FIELDS = {
    "defaultMode": "The mode of a namespace without the `gpu2dra.io/migration` label.",
    "onError": "When a ResourceClaimTemplate cannot be created (or caches have not synced): "
    "`allow` admits the pod unchanged with a warning, `deny` refuses it (code 503). A fault "
    "of gpu2dra's own (an unexpected exception) is not an answer `onError` shapes: it fails "
    "the call with HTTP 500, and the webhook registration's `failurePolicy` decides (the "
    "chart's `webhook.mutating.failurePolicy`, `Ignore` by default: the pod is admitted "
    "unchanged).",
    "keepNodeSelectors": "Keep `nodeSelector` and node-affinity terms on GFD labels after "
    "turning them into device selectors (by default they are removed: DRA nodes need not "
    "carry GFD labels).",
    "skipNamespaces": "Namespaces whose pods are never changed; `gpu2dra serve` adds its own "
    "namespace.",
    "deviceClasses": "The DeviceClasses assumed to exist without a cluster (`--offline`, "
    "`gpu2dra translate`), and by `report` when DeviceClasses cannot be read.",
    "mappings": "Legacy resource name (exact, or a prefix ending in `*`) to mapping. When "
    "given, it is the whole set: the default mappings are not merged in.",
    "migSingle": "The pattern mapping that MIG single-strategy pods (`nvidia.com/gpu` on a "
    "node whose GFD product is `<model>-MIG-<profile>`) are translated with; `none` leaves "
    "such pods alone.",
    "preemptingPods": "Pods whose priority class can preempt (a `priorityClassName` whose "
    "`preemptionPolicy` is not `Never`): `leave` keeps them on the device plugin, where they "
    "still preempt; `translate` moves them, with a warning that the scheduler does not preempt "
    "for DRA claims on Kubernetes 1.34-1.37.",
    "kueuePods": "Pods Kueue queues through its `pod` or `deployment` integration (label "
    "`kueue.x-k8s.io/queue-name`, no Job-style controller), where that Kueue would not count "
    "their DRA claims against the ClusterQueue: its DRA gate off, a DeviceClass missing from "
    "`deviceClassMappings`, or CEL selectors it refuses. `leave` keeps them on the device "
    "plugin, counted as before; `translate` moves them, with a warning. See "
    "[Kueue](../concepts/quota.md#kueue).",
    "noDraCapacity": "Pods whose claims no node could take: no ResourceSlice publishes a "
    "device of their DeviceClass, and no node autoscaler gpu2dra sees can add a node with one "
    "(Karpenter skips pods with claims; Cluster Autoscaler adds DRA nodes from zero only with "
    "clusterapi). `leave` keeps them on the device plugin, where they run, with a warning that "
    "names the autoscaler and what would change it; `translate` moves them, Pending until a "
    "DRA node joins. Judged only where gpu2dra knows the cluster's ResourceSlices (offline "
    "nothing is known of devices; the webhook's feed is still to come). See "
    "[capacity](../concepts/capacity.md).",
    "cloudPools": "Pods whose node terms pin them to a cloud node pool or instance type "
    "(`cloud.google.com/gke-accelerator`, `cloud.google.com/gke-nodepool`, "
    "`node.kubernetes.io/instance-type`, `karpenter.sh/nodepool`, "
    "`karpenter.k8s.aws/instance-gpu-*`, `eks.amazonaws.com/nodegroup`, "
    "`kubernetes.azure.com/agentpool`): such pools are most often device-plugin pools. "
    "`leave` keeps them on the device plugin at admission; `translate` moves them with the "
    "term kept and a warning. Offline they are translated with the warning. See "
    "[capacity](../concepts/capacity.md#cloud-node-pools).",
    "templatesPerNamespace": "The most ResourceClaimTemplates gpu2dra makes in one "
    "namespace, counted from the webhook's cache of its own templates (no API call). Each "
    "distinct shape of GPU request (DeviceClass, count, selectors, sharing) is one template, "
    "shared by every pod of that shape; a namespace runs a handful, and 100 leaves room for "
    "far more while bounding what forged reviews, pods the API server then refuses, or a new "
    "product string in every nodeSelector can pile up: at most 100 objects a namespace in "
    "etcd and in each replica's cache. A pod that needs one more is left on the device plugin "
    "with a warning (outcome `template-limit`, counted in `gpu2dra_outcomes_total`), under "
    "either `onError`; `gpu2dra prune-templates` deletes the unused ones. A pod of several "
    "shapes, or pods admitted at the same moment, can take a namespace a few templates past "
    "it. See [capacity](../operations/capacity.md).",
    "draSchedulers": "The schedulers known to allocate DRA claims: a GPU pod whose "
    "`spec.schedulerName` is another one is left as it is, with a warning (an unset "
    "`schedulerName` is `default-scheduler`). See [fail closed](../concepts/translation.md"
    "#fail-closed).",
    "translateKinds": "Kinds no rule of gpu2dra's knows, as `group/Kind` "
    "(`apps.kruise.io/CloneSet`), whose pod specs `gpu2dra translate` and `POST /translate` "
    "rewrite in place. Every other kind no rule knows is left as it is, with a note: its "
    "controller may read GPU counts from its pod specs or refuse `resourceClaims` in them, "
    "and the pods it creates are translated at admission all the same. Name a kind only when "
    "its controller copies its pod templates into pods as written and reads no GPU count "
    "from them. Kinds a rule leaves (Knative, KServe, Trainer, Seldon, Grove, AppWrapper) "
    "stay left. See [workloads](../concepts/workloads.md#kinds-no-rule-knows).",
    "ignoreKeys": "Pod annotations, node labels (in `nodeSelector` and required node "
    "affinity) and extended resources in a GPU vendor's domain (`nvidia.com`, `hami.io`, "
    "the mapped resources' domains and their subdomains) that leave no pod untranslated: "
    "exact keys, or prefixes ending in `*` (`hami.io/*`). An ignored annotation is not "
    "read (HAMi's `nvidia.com/use-gputype` becomes no selector), an ignored label stays a "
    "node term, an ignored resource stays in its container. Only for keys the cluster knows "
    "pick no GPU; a key outside those domains is an error. See [fail closed]"
    "(../concepts/translation.md#fail-closed).",
}
MAPPING_FIELDS = {
    "deviceClassName": (
        "string",
        "required",
        "The DeviceClass the devices are requested from.",
    ),
    "selectors": (
        "list of CEL expressions",
        "`[]`",
        "Added to every request of the mapping; `{profile}` is the MIG profile the `*` "
        "captured, as the DRA driver spells it (`mig-1g.10gb.me` is `1g.10gb+me`).",
    ),
    "nodeLabels": (
        " \\| ".join(f"`{v}`" for v in get_args(mapping.NodeLabels)),
        "`gpu`; `mig` for a pattern",
        "Which GFD node labels may become device selectors: those of whole GPUs (product, "
        "family, memory, ...), those that hold for a MIG slice (its memory is the slice's), "
        "or none.",
    ),
    "inTree": (
        " \\| ".join(f"`{v}`" for v in get_args(mapping.InTree)),
        "`defer`",
        "Where a DeviceClass serves the resource in-tree (`extendedResourceName`, "
        "KEP-5004): `defer` leaves a pod that gains nothing from translation to the "
        "scheduler, `translate` translates every pod.",
    ),
    "sharing": (
        "`refuse` \\| `TimeSlicing` \\| `MPS` \\| the driver's `GpuSharing` map",
        "`refuse`",
        "Pods that select GPUs the device plugin shares: `refuse` leaves them alone (they "
        "would become exclusive); a strategy translates them with the driver's opaque "
        "`GpuConfig` (`MigDeviceConfig` for MIG) in the template.",
    ),
    "consumable": (
        "`{shares, memory, driver}`",
        "unset",
        "Pods that select GPUs the device plugin shares keep sharing them with other pods, "
        "as DRA consumable capacity (KEP-5075), where the cluster's ResourceSlices publish "
        "devices with `allowMultipleAllocations` and that capacity: `shares` (default 1; "
        "`none`) is the capacity `shares` one device-plugin replica takes (set the driver's "
        "`--consumable-shares` to the device plugin's `replicas`), `memory` (default `none`) "
        "a resource such as HAMi's `nvidia.com/gpumem` (MiB) that becomes capacity `memory`, "
        "`driver` (default `gpu.nvidia.com`) the capacities' domain. Whole-GPU mappings "
        "only, not with `sharing`. See [Sharing](../concepts/sharing.md).",
    ),
}
# Example values, one per mapping field: the docs test parses each.
MAPPING_EXAMPLES: dict[str, Any] = {
    "deviceClassName": "gpu.nvidia.com",
    "selectors": ["device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"],
    "nodeLabels": "none",
    "inTree": "translate",
    "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}},
    "consumable": {"shares": 1, "memory": "nvidia.com/gpumem"},
}


def _values(key: str) -> str:
    choices: dict[str, tuple[str, ...]] = {
        "defaultMode": policy.MODES,
        "onError": get_args(policy.OnError),
        "preemptingPods": get_args(policy.LeaveOrTranslate),
        "kueuePods": get_args(policy.LeaveOrTranslate),
        "noDraCapacity": get_args(policy.LeaveOrTranslate),
        "cloudPools": get_args(policy.LeaveOrTranslate),
    }
    if key in choices:
        return " \\| ".join(f"`{v}`" for v in choices[key])
    if key == "migSingle":
        return "`none` \\| a pattern key of `mappings`"
    return {
        "keepNodeSelectors": "`true` \\| `false`",
        "skipNamespaces": "list of namespace names",
        "deviceClasses": "list of DeviceClass names",
        "mappings": "map of resource name to [mapping](#mappings)",
        "draSchedulers": "non-empty list of scheduler names",
        "ignoreKeys": "list of keys (`domain/name`) or prefixes ending in `*`",
        "templatesPerNamespace": "a whole number, 1 or more",
        "translateKinds": "list of `group/Kind`",
    }[key]


def _flow(value: Any) -> str:
    if isinstance(value, dict):
        return "see [the default](#the-embedded-default)"
    return f"`{json.dumps(value)}`"


def _schema_text(node: Any) -> str:
    """A schema node, shortly: its enum, or its type."""
    if not isinstance(node, dict):
        return ""
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    if "oneOf" in node:
        return " or ".join(_schema_text(n) for n in node["oneOf"])
    kind = node.get("type", "")
    kind = " \\| ".join(kind) if isinstance(kind, list) else str(kind)
    if kind == "array":
        return f"array of {_schema_text(node.get('items'))}"
    return f"{kind}"


def _chart_schema() -> dict[str, Any]:
    if not SCHEMA.exists():
        return {}
    found = json.loads(SCHEMA.read_text()).get("properties", {}).get("policy", {})
    return found if isinstance(found, dict) else {}


def _schema_rows(props: dict[str, Any], names: list[str], prefix: str = "") -> list[str]:
    rows = []
    for name in names:
        node = props.get(name)
        if node is None:  # the chart would refuse a policy field the server takes
            raise SystemExit(f"policy field {prefix}{name} is not in {SCHEMA}: add it there")
        text = _schema_text(node)
        rows.append(f"| `{prefix}{name}` | {text} |")
    return rows


def _nested(node: Any, path: str) -> Iterator[str]:
    """Rows for the object properties under `node`, depth first."""
    if not isinstance(node, dict):
        return
    for option in node.get("oneOf", []):
        yield from _nested(option, path)
    for name, sub in (node.get("properties") or {}).items():
        where = f"{path}.{name}"
        yield f"| `{where}` | {_schema_text(sub) or 'object'} |"
        yield from _nested(sub, where)


def policy_reference() -> str:
    keys = list(FIELDS)
    if set(keys) != policy.KEYS:
        raise SystemExit(
            f"tools/gendocs.py: FIELDS {sorted(keys)} differ from the policy's fields "
            f"{sorted(policy.KEYS)}: describe every field"
        )
    default = policy.DEFAULT
    out = [
        _banner("app/core/policy.py (DEFAULT_POLICY_YAML) and the chart's values.schema.json"),
        "# Policy file reference",
        "",
        "The policy says which legacy resources become which DRA requests, and what happens "
        "in namespaces that carry no label. `gpu2dra serve --policy FILE` and `gpu2dra "
        "translate --policy FILE` read it; `doctor`, `explain`, `report`, `quota` and "
        "`deviceclasses` take `--policy FILE` too, else the chart's ConfigMap beside the "
        "Service the webhooks point at, else the embedded default. The chart renders it "
        "from its `policy` value into that ConfigMap (`policy.yaml`).",
        "",
        "Every field is optional: one left out takes the embedded default below. Unknown "
        "fields and wrong values are errors that name the field.",
        "",
        "## The embedded default",
        "",
        "```yaml",
        policy.DEFAULT_POLICY_YAML.rstrip("\n"),
        "```",
        "",
        "## Fields",
        "",
        "| field | values | default | what it does |",
        "| --- | --- | --- | --- |",
    ]
    for key in keys:
        out.append(f"| `{key}` | {_values(key)} | {_flow(default[key])} | {_cell(FIELDS[key])} |")
    out += [
        "",
        "## Mappings",
        "",
        "Each entry of `mappings`: its key is a resource name such as `nvidia.com/gpu`, or a "
        "prefix ending in `*` (`nvidia.com/mig-*`) that captures a MIG profile as the "
        "device plugin spells it. The longest matching prefix wins.",
        "",
        "| field | values | default | what it does |",
        "| --- | --- | --- | --- |",
    ]
    for name, (values, dflt, text) in MAPPING_FIELDS.items():
        out.append(f"| `{name}` | {values} | {dflt} | {_cell(text)} |")
    schema = _chart_schema()
    props = schema.get("properties") or {}
    mapping = ((props.get("mappings") or {}).get("additionalProperties") or {}).get(
        "properties"
    ) or {}
    out += [
        "",
        "## What the chart's schema accepts",
        "",
        "`helm install` checks the chart's `policy` value against "
        "`charts/gpu2dra/values.schema.json` before gpu2dra reads it:",
        "",
        "| field | the chart's schema |",
        "| --- | --- |",
        *_schema_rows(props, keys),
        *_schema_rows(mapping, list(MAPPING_FIELDS), "mappings.<resource>."),
    ]
    sharing = mapping.get("sharing")
    rows = list(_nested(sharing, "mappings.<resource>.sharing"))
    if rows:
        out += [
            "",
            "The `sharing` map, as the schema gives it (the driver's `GpuSharing`):",
            "",
            "| field | the chart's schema |",
            "| --- | --- |",
            *rows,
        ]
    rows = list(_nested(mapping.get("consumable"), "mappings.<resource>.consumable"))
    if rows:
        out += [
            "",
            "The `consumable` map, as the schema gives it:",
            "",
            "| field | the chart's schema |",
            "| --- | --- |",
            *rows,
        ]
    return "\n".join(out) + "\n"


# ---- the files ---------------------------------------------------------------------------

# ---- the outcome codes ---------------------------------------------------------------------

_KINDS = {
    "left": "the pod is left as it is, on the device plugin",
    "translated": "the pod is translated, and something its owner relied on changes",
    "note": "`gpu2dra translate` says it of a manifest; nothing is left or changed",
}


def outcomes_reference() -> str:
    """Every code of app/core/outcomes.py, its kind and its message, fields in italics."""
    lines = [
        _banner("app/core/outcomes.py"),
        "# Outcome codes",
        "",
        "Every reason gpu2dra leaves a pod, changes it, or says something about a manifest has a "
        "code and one message. Admission warnings, `gpu2dra translate`, `/translate`, `explain` "
        "and `report` show the message; `report` and the metric "
        "`gpu2dra_outcomes_total{code, kind}` ([metrics](metrics.md)) count the code, so a "
        "dashboard or a script never matches on words.",
        "",
        "| kind | meaning |",
        "|---|---|",
        *(f"| `{kind}` | {meaning} |" for kind, meaning in _KINDS.items()),
        "",
        "| code | kind | message |",
        "|---|---|---|",
    ]
    for code in Code:
        message = re.sub(r"\{(\w+)[^}]*\}", r"*\1*", code.message)
        lines.append(f"| `{code.value}` | {code.kind} | {_cell(message)} |")
    return "\n".join(lines) + "\n"


GENERATED: dict[str, Callable[[], str]] = {
    "docs/reference/cli.md": cli_reference,
    "docs/reference/policy.md": policy_reference,
    "docs/reference/outcomes.md": outcomes_reference,
}


def stale() -> list[str]:
    """The generated files whose text differs from what the code gives now."""
    found = []
    for path, make in GENERATED.items():
        file = ROOT / path
        if not file.exists() or file.read_text() != make():
            found.append(path)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.gendocs")
    parser.add_argument("--write", action="store_true", help="regenerate the files")
    args = parser.parse_args(argv)
    if args.write:
        for path, make in GENERATED.items():
            (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
            (ROOT / path).write_text(make())
            print(f"wrote {path}")
        return 0
    found = stale()
    for path in found:
        print(f"{path} is stale: run {REGENERATE}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
