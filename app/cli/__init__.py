"""`gpu2dra`: serve the webhook, translate manifests offline, make certificates, diagnose,
plan and maintain a running cluster.

`arguments` holds the command line's grammar, `commands` what each command does."""

from app.cli.commands import main
from app.manifests.files import MAX_MANIFEST_BYTES

__all__ = ["MAX_MANIFEST_BYTES", "main"]
