"""`gpu2dra deviceclasses`: a DeviceClass per MIG profile for the in-tree path."""

from __future__ import annotations

import kubernetes_validate
import pytest

from app.cli import main
from app.core.nvidia.mig import device_class, mig_profile, plugin_resource
from app.plan.deviceclasses.render import render
from app.readers.cel.devices import class_selectors, devices_of, select
from app.readers.profiles import published_profiles
from tests.support.cluster import gpu_devices, gpu_resource_slice
from tests.support.controlplane import releases

SLICES = [
    gpu_resource_slice("a", gpu_devices("a", gpus=2, mig={0: ["3g.20gb", "1g.5gb", "1g.5gb"]})),
    gpu_resource_slice("b", gpu_devices("b", gpus=1, mig={0: ["1g.5gb+me"]})),
]


@pytest.mark.parametrize("profile", ["1g.5gb", "1g.10gb+me", "1g.20gb+me.all", "1c.3g.20gb"])
def test_plugin_name_and_profile_are_one_another(profile: str) -> None:
    resource = plugin_resource(profile)
    assert resource.startswith("nvidia.com/mig-") and "+" not in resource
    assert mig_profile(resource.removeprefix("nvidia.com/mig-")) == profile


def test_the_cluster_profiles_are_read_from_its_slices() -> None:
    assert published_profiles(devices_of(SLICES)) == ["1g.5gb", "1g.5gb+me", "3g.20gb"]


def test_each_class_selects_the_devices_of_its_profile_only() -> None:
    devices = devices_of(SLICES)
    for profile, expected in (("1g.5gb", 2), ("1g.5gb+me", 1), ("3g.20gb", 1), ("7g.40gb", 0)):
        cls = device_class(profile)
        assert cls["spec"]["extendedResourceName"] == plugin_resource(profile)  # type: ignore[index]
        chosen = select(devices, class_selectors(cls))
        assert not chosen.errors
        assert len(chosen.selected) == expected, profile
        assert all(d.attributes["profile"] == {"string": profile} for d in chosen.selected)


@pytest.mark.parametrize("version", [r.removeprefix("v") for r in releases()])
def test_the_classes_are_valid_deviceclasses(version: str) -> None:
    for profile in ("1g.5gb", "1g.10gb+me", "1c.3g.20gb"):
        kubernetes_validate.validate(device_class(profile), version, strict=True)


def test_offline_profiles_and_a_bad_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deviceclasses", "--profiles", "1g.10gb+me, 3g.20gb"]) == 0
    out = capsys.readouterr().out
    assert out == render(["3g.20gb", "1g.10gb+me"])
    assert "name: mig-1g-10gb-me.nvidia.com" in out
    assert "extendedResourceName: nvidia.com/mig-1g.10gb.me" in out
    with pytest.raises(SystemExit) as usage:  # a bad flag value is a usage error
        main(["deviceclasses", "--profiles", "1g.10gb,10gb"])
    assert usage.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: gpu2dra deviceclasses")
    assert "--profiles: not a MIG profile as the DRA driver spells it: 10gb" in err
