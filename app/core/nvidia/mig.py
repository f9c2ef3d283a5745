"""MIG profiles as the device plugin and the DRA driver spell them.

The device plugin names a profile in its resource (`nvidia.com/mig-1g.10gb.me`, `+` written as
`.`); the driver publishes it as the `profile` attribute of `mig.nvidia.com` devices
(`1g.10gb+me`).
"""

from __future__ import annotations

import re

from app.core.kube import MANAGED_BY

# [0-9], not \d: Python's \d takes any Unicode digit (Arabic-Indic, fullwidth), which no
# resource name holds.
_MIG_BASE = re.compile(r"(?:[0-9]+c\.)?[0-9]+g\.[0-9]+gb")
# The device plugin writes a profile's `+` as `.` (go-nvlib attributes: me, me.all, gfx; -me).
_MIG_ATTRS = ((".me.all", "+me.all"), (".me", "+me"), (".gfx", "+gfx"), ("-me", "-me"))


def mig_profile(spelled: str) -> str | None:
    """`1g.10gb.me` (device-plugin resource suffix) -> `1g.10gb+me` (DRA `profile`)."""
    match = _MIG_BASE.match(spelled)
    if match is None:
        return None
    profile, rest = match.group(), spelled[match.end() :]
    while rest:
        for plugin, dra in _MIG_ATTRS:
            if rest.startswith(plugin):
                profile, rest = profile + dra, rest[len(plugin) :]
                break
        else:
            return None
    return profile


def plugin_resource(profile: str) -> str:
    """`1g.10gb+me` (DRA `profile`) -> `nvidia.com/mig-1g.10gb.me`, the device plugin's name
    for it (mixed strategy: `strings.ReplaceAll("mig-"+profile, "+", ".")`)."""
    return "nvidia.com/mig-" + profile.replace("+", ".")


def device_class(profile: str) -> dict[str, object]:
    """A DeviceClass for one MIG profile that serves the device plugin's name in-tree
    (KEP-5004): the NVIDIA driver makes one class for all MIG devices, and the in-tree path
    cannot select a profile within a class, so it needs a class per profile."""
    attrs = "device.attributes['gpu.nvidia.com']"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {
            "name": f"mig-{re.sub(r'[.+]', '-', profile)}.nvidia.com",
            "labels": dict(MANAGED_BY),
        },
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == 'gpu.nvidia.com' && {attrs}.type == "
                        f"'mig' && {attrs}.profile == '{profile}'"
                    }
                }
            ],
            "extendedResourceName": plugin_resource(profile),
        },
    }
