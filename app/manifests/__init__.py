"""Manifests of any kind, translated offline: YAML in and out, pod specs found in any document.
The engine of `/translate` and `gpu2dra translate`."""
