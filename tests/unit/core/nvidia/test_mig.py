"""MIG profiles as the device plugin and the DRA driver spell them (app/core/nvidia/mig.py)."""

from __future__ import annotations

import pytest

from app.core.nvidia.mig import mig_profile


@pytest.mark.parametrize(
    ("spelled", "profile"),
    [
        ("1g.10gb", "1g.10gb"),
        ("1c.3g.20gb", "1c.3g.20gb"),
        ("1g.10gb.me", "1g.10gb+me"),
        ("1g.10gb.me.all", "1g.10gb+me.all"),
        ("7g.80gb-me", "7g.80gb-me"),
    ],
)
def test_device_plugin_spellings_become_driver_profiles(spelled: str, profile: str) -> None:
    assert mig_profile(spelled) == profile


@pytest.mark.parametrize(
    "spelled",
    ["\u0661g.10gb", "1g.\u0661\u0660gb", "\uff11g.10gb", "1g.10gb.xx", "g.10gb", "1g.gb"],
)
def test_anything_else_is_no_profile(spelled: str) -> None:
    """Only ASCII digits: a resource name holds no other, and Python's \\d takes them all."""
    assert mig_profile(spelled) is None
