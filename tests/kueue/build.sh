#!/usr/bin/env bash
# Build the Kueue manager the e2e tests run beside the control plane (tests/e2e/test_kueue.py),
# from the version this folder's go.mod pins, into <bin>/kueue/: the `kueue` binary, and
# Kueue's CRDs and webhook configurations from the same module (config/). <bin> is
# ${GPU2DRA_BIN:-<repo>/.bin}. Stamped over go.mod, go.sum, this script and `go version`:
# unchanged, a no-op. Cold (empty Go caches, 2 cores): ~7 min; warm: seconds.
#   bash tests/kueue/build.sh
# A new Kueue: cd tests/kueue && go get -tool sigs.k8s.io/kueue/cmd/kueue@vX.Y.Z && go mod tidy
set -euo pipefail
now() { echo "${EPOCHREALTIME:-$(date +%s)}"; }
started="$(now)"
elapsed() { awk -v a="$started" -v b="$(now)" 'BEGIN {printf "%.2fs", b - a}'; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${GPU2DRA_BIN:-$repo/.bin}/kueue"
cd "$here"

sha256() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi; }
command -v go >/dev/null || { echo "kueue/build.sh: Go is required (https://go.dev/dl/)" >&2; exit 1; }
version="$(awk '$1 == "sigs.k8s.io/kueue" {print $2; exit}' go.mod)"
want="$({ cat go.mod go.sum build.sh; go version; } | sha256 | cut -d' ' -f1)"
if [[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$want" && -x "$out/kueue" ]]; then
    echo "Kueue $version is current in $out (checked in $(elapsed))"
    exit 0
fi
rm -rf "$out"
mkdir -p "$out/config"
echo "building Kueue $version into $out"
# The -X flag is what Kueue's Makefile sets: the manager logs and reports its version.
go build -mod=readonly -trimpath -o "$out/kueue" \
    -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version" sigs.k8s.io/kueue/cmd/kueue
module="$(go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/kueue)"
cp -r "$module/config/components/crd/bases" "$out/config/crd"
cp "$module/config/components/webhook/manifests.yaml" "$out/config/webhooks.yaml"
chmod -R u+w "$out/config"
echo "$want" > "$out/.stamp"
echo "built Kueue $version in $(elapsed)"
