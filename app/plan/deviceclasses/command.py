"""`gpu2dra deviceclasses` run: the profiles given, else those the cluster's ResourceSlices
publish, printed as DeviceClasses."""

from __future__ import annotations

import sys

from app.kubeconfig import Kubeconfig
from app.plan.deviceclasses.render import render
from app.readers.cel.devices import devices_of
from app.readers.client import RESOURCE, connect
from app.readers.profiles import published_profiles


def run(*, kubeconfig: Kubeconfig, profiles: list[str] | None) -> int:
    """`profiles` as the command line checked them; None: read them from the cluster."""
    if profiles is None:
        reader = connect(kubeconfig)
        profiles = published_profiles(devices_of(reader.items(f"{RESOURCE}/resourceslices")))
    sys.stdout.write(render(profiles))
    return 0
