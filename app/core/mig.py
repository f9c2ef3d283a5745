"""MIG profiles as the device plugin and the DRA driver spell them.

The device plugin names a profile in its resource (`nvidia.com/mig-1g.10gb.me`, `+` written as
`.`); the driver publishes it as the `profile` attribute of `mig.nvidia.com` devices
(`1g.10gb+me`).
"""

from __future__ import annotations

import re

_MIG_BASE = re.compile(r"(?:\d+c\.)?\d+g\.\d+gb")
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
