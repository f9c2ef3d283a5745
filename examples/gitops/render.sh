#!/usr/bin/env bash
# CI for Flux (and anyone who commits what the cluster runs): the overlay built and translated
# into deploy/prod/manifests.yaml, which ../flux/kustomization.yaml syncs. Exits non-zero when a
# GPU pod would stay on the device plugin (gpu2dra translate --strict: 3).
#   bash examples/gitops/render.sh [OUT_DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/deploy/prod}"
mkdir -p "$out"
kustomize build "$here/overlays/prod" | gpu2dra translate --strict > "$out/manifests.yaml"
