"""The policy file: defaults, overrides, and clear errors for mistakes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core.mapping import PolicyError
from app.core.policy import Policy, load_policy, parse_policy


def test_embedded_default() -> None:
    policy = load_policy(None)
    assert policy.default_mode == "disabled" and policy.on_error == "allow"
    assert policy.mode_for({}) == "disabled"
    assert policy.mode_for({"gpu2dra.io/migration": "audit"}) == "audit"
    mapping, captured = policy.mapping_for("nvidia.com/mig-1g.5gb")  # type: ignore[misc]
    assert mapping.device_class == "mig.nvidia.com" and captured == "1g.5gb"
    assert policy.mapping_for("nvidia.com/gpu.shared") is None
    assert "kube-system" in policy.skip_namespaces


def test_policy_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "defaultMode: audit\nonError: deny\nmappings:\n"
        "  example.com/fpga: {deviceClassName: fpga.example.com}\n"
    )
    policy = load_policy(path)
    assert policy.default_mode == "audit" and policy.on_error == "deny"
    assert policy.mapping_for("nvidia.com/gpu") is None
    assert policy.mapping_for("example.com/fpga")[0].device_class == "fpga.example.com"  # type: ignore[index]


def test_a_field_left_out_takes_the_default(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("defaultMode: enabled\n")
    policy = load_policy(path)
    assert policy.default_mode == "enabled"
    assert policy.mappings == load_policy(None).mappings
    assert policy.mapping_for("nvidia.com/gpu")[0].device_class == "gpu.nvidia.com"  # type: ignore[index]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "policy: must be a YAML map"),
        ({"defaultmode": "enabled"}, "unknown field(s): defaultmode"),
        ({"onError": "maybe"}, "onError: must be one of allow, deny"),
        ({"keepNodeSelectors": "yes"}, "keepNodeSelectors: must be true or false"),
        ({"mappings": {"nvidia.com/gpu": {}}}, "needs deviceClassName"),
        (
            {"mappings": {"nvidia.com/gpu": {"deviceClassName": "x", "count": 2}}},
            "unknown field(s): count",
        ),
        ({"mappings": {"nvidia.com/*gpu": {"deviceClassName": "x"}}}, "may only end"),
        ({"draSchedulers": []}, "draSchedulers: must be a non-empty list of scheduler names"),
        ({"draSchedulers": "default-scheduler"}, "draSchedulers: must be a non-empty list"),
        ({"draSchedulers": ["", "x"]}, "draSchedulers: must be a non-empty list"),
        ({"translateKinds": "apps.kruise.io/CloneSet"}, "translateKinds: must be a list"),
        ({"translateKinds": ["CloneSet"]}, "translateKinds['CloneSet']: must be a kind with"),
        ({"translateKinds": ["apps.kruise.io/v1/CloneSet"]}, "must be a kind with its API group"),
        ({"translateKinds": [3]}, "translateKinds[3]: must be a kind with its API group"),
        ({"ignoreKeys": "nvidia.com/numa-bind"}, "ignoreKeys: must be a list of keys"),
        ({"ignoreKeys": [3]}, "ignoreKeys[3]: must be a string"),
        ({"ignoreKeys": ["numa-bind"]}, "ignoreKeys['numa-bind']: must be a key with a domain"),
        ({"ignoreKeys": ["/x"]}, "must be a key with a domain"),
        ({"ignoreKeys": ["*/x"]}, "must be a key with a domain"),
        ({"ignoreKeys": ["nvidia.com/a*b"]}, "ignoreKeys['nvidia.com/a*b']: `*` may only end"),
        (
            {"ignoreKeys": ["example.com/x"]},
            "ignoreKeys['example.com/x']: ignores nothing: only keys in hami.io, nvidia.com",
        ),
        ({"mappings": {"gpu": {"deviceClassName": "x"}}}, "key must be a resource name"),
        ({"mappings": {"a/b": {"deviceClassName": "x", "selectors": "cel"}}}, "list of CEL"),
        (
            {"mappings": {"a/b": {"deviceClassName": "x", "nodeLabels": "all"}}},
            "nodeLabels: must be one of gpu, mig, none",
        ),
        (
            {"mappings": {"a/b": {"deviceClassName": "x", "sharing": "Always"}}},
            "sharing: strategy must be one of TimeSlicing, MPS",
        ),
        (
            {"mappings": {"a/b": {"deviceClassName": "x", "sharing": 3}}},
            "sharing: must be refuse, TimeSlicing, MPS or a map",
        ),
        (
            {
                "mappings": {
                    "a/b": {
                        "deviceClassName": "x",
                        "sharing": {"strategy": "MPS", "timeSlicingConfig": {}},
                    }
                }
            },
            "unknown field(s) for MPS: timeSlicingConfig",
        ),
        ({"migSingle": "nvidia.com/gpu"}, "migSingle: must be none or a pattern mapping"),
        ({"skipNamespaces": "kube-system"}, "skipNamespaces: must be a list"),
        ({"deviceClasses": [""]}, "deviceClasses: must be a list"),
    ],
)
def test_policy_errors(raw: Any, message: str) -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy(raw)
    assert message in str(err.value)


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [")
    with pytest.raises(PolicyError, match="not valid YAML"):
        load_policy(bad)


def test_every_default_is_written_once(tmp_path: Path) -> None:
    """An empty policy file, a map with no fields and the dataclass's own defaults are all
    the embedded default."""
    embedded = load_policy(None)
    empty = tmp_path / "policy.yaml"
    empty.write_text("{}\n")
    assert load_policy(empty) == embedded
    assert parse_policy({}) == embedded
    # mig_single names one of the mappings: given with them.
    assert Policy(mappings=embedded.mappings, mig_single=embedded.mig_single) == embedded


def test_mig_single_takes_the_mig_pattern_mapping() -> None:
    assert load_policy(None).mig_single == load_policy(None).mapping_for("nvidia.com/mig-1g.5gb")[0]  # type: ignore[index]
    assert parse_policy({"migSingle": "none"}).mig_single is None
    own = parse_policy({"mappings": {"nvidia.com/gpu": {"deviceClassName": "gpu.nvidia.com"}}})
    assert own.mig_single is None


def test_default_policy_is_loaded() -> None:
    assert load_policy(None).default_mode == "disabled"


def test_fail_closed_fields() -> None:
    default = load_policy(None)
    assert default.dra_schedulers == {"default-scheduler"} and default.ignore_keys == ()
    assert default.watches("nvidia.com/numa-bind") and default.watches("hami.io/x")
    assert default.watches("gpu.nvidia.com/x") and not default.watches("notnvidia.com/x")
    assert not default.watches("team") and not default.watches("example.com/x")
    policy = parse_policy(
        {
            "draSchedulers": ["default-scheduler", "kai-scheduler"],
            "ignoreKeys": ["nvidia.com/gpu.present", "hami.io/*", "nvidia.com/gpu.present"],
            "mappings": {
                "nvidia.com/gpu": {"deviceClassName": "gpu.nvidia.com"},
                "amd.com/gpu": {"deviceClassName": "gpu.amd.com"},
            },
        }
    )
    assert policy.dra_schedulers == {"default-scheduler", "kai-scheduler"}
    assert policy.ignore_keys == ("nvidia.com/gpu.present", "hami.io/*")
    assert not policy.watches("nvidia.com/gpu.present") and not policy.watches("hami.io/a")
    assert policy.watches("nvidia.com/gpu.presents") and policy.watches("amd.com/x")
    amd = {"amd.com/gpu": {"deviceClassName": "gpu.amd.com"}}
    assert parse_policy({"ignoreKeys": ["amd.com/x"], "mappings": amd}).ignores("amd.com/x")


def test_gpu2dra_makes_at_most_so_many_templates_a_namespace() -> None:
    assert parse_policy({}).templates_per_namespace == 100
    assert parse_policy({"templatesPerNamespace": 5}).templates_per_namespace == 5
    for wrong in (0, -1, "10", True, 1.5):
        with pytest.raises(PolicyError, match="templatesPerNamespace"):
            parse_policy({"templatesPerNamespace": wrong})
