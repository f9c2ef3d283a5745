"""The logs a failed end-to-end run leaves behind: the control plane's and each webhook's."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path


def copy_logs(plane_logs: Path, webhook_logs: Mapping[str, Path], dest: Path) -> bool:
    """Replace `dest` with the control-plane logs plus webhook-<module>.log for each gpu2dra
    webhook (one per test module); False when there is nothing to copy."""
    if not plane_logs.is_dir():
        return False
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(plane_logs, dest)
    for module, log in webhook_logs.items():
        if log.is_file():
            shutil.copyfile(log, dest / f"webhook-{module}.log")
    return True
