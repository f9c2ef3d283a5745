"""`gpu2dra deviceclasses`: a DeviceClass per MIG profile, for the in-tree path to serve
`nvidia.com/mig-<profile>` (KEP-5004), as YAML for `kubectl apply` or GitOps.

The profiles come from the cluster's ResourceSlices (the MIG devices the NVIDIA driver
publishes), or from `--profiles` without a cluster.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from app.core.mig import device_class
from app.manifests import yamlio
from app.readers.cel.devices import devices_of
from app.readers.client import RESOURCE, connect
from app.readers.profiles import published_profiles


def render(profiles: Iterable[str]) -> str:
    classes = [device_class(p) for p in sorted(set(profiles))]
    return yamlio.dump_all(classes) if classes else "# no MIG profile published\n"


def main(args: argparse.Namespace) -> int:
    if args.profiles is not None:  # checked by the command line
        profiles = args.profiles
    else:
        reader = connect(args.kubeconfig)
        profiles = published_profiles(devices_of(reader.items(f"{RESOURCE}/resourceslices")))
    sys.stdout.write(render(profiles))
    return 0
