#!/usr/bin/env bash
# Build the standalone kustomize (sigs.k8s.io/kustomize/kustomize/v5) that runs `gpu2dra
# translate` as a KRM exec function in tests/chart/test_krm_function.py, from the version this
# folder's go.mod pins, into <bin>/kustomize/kustomize. <bin> is ${GPU2DRA_BIN:-<repo>/.bin}.
# Stamped over go.mod, go.sum, this script and `go version`: unchanged, a no-op.
#   bash tests/kustomize/build.sh
# A new kustomize: cd tests/kustomize && go get -tool sigs.k8s.io/kustomize/kustomize/v5@vX.Y.Z && go mod tidy
set -euo pipefail
now() { echo "${EPOCHREALTIME:-$(date +%s)}"; }
started="$(now)"
elapsed() { awk -v a="$started" -v b="$(now)" 'BEGIN {printf "%.2fs", b - a}'; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${GPU2DRA_BIN:-$repo/.bin}/kustomize"
cd "$here"

sha256() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi; }
command -v go >/dev/null || { echo "kustomize/build.sh: Go is required (https://go.dev/dl/)" >&2; exit 1; }
version="$(awk '$1 == "sigs.k8s.io/kustomize/kustomize/v5" {print $2; exit}' go.mod)"
want="$({ cat go.mod go.sum build.sh; go version; } | sha256 | cut -d' ' -f1)"
if [[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$want" && -x "$out/kustomize" ]]; then
    echo "kustomize $version is current in $out (checked in $(elapsed))"
    exit 0
fi
rm -rf "$out"
mkdir -p "$out"
echo "building kustomize $version into $out"
# The -X flag is what kustomize's release sets: `kustomize version` says the version.
go build -mod=readonly -trimpath -o "$out/kustomize" \
    -ldflags "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=kustomize/$version" \
    sigs.k8s.io/kustomize/kustomize/v5
echo "$want" > "$out/.stamp"
echo "built kustomize $version in $(elapsed)"
