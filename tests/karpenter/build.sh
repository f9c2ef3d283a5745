#!/usr/bin/env bash
# Build Karpenter's kwok provider, the node autoscaler tests/e2e/test_karpenter.py runs beside
# the control plane, from the version this folder's go.mod pins (sigs.k8s.io/karpenter/kwok, the
# provider's main package), into <bin>/karpenter/: the `karpenter` binary and its CRDs from the
# same module in crds/ (NodePool, NodeClaim, NodeOverlay, CapacityBuffer from kwok/charts/crds:
# pkg/apis/crds's with the karpenter.kwok.sh label domain restricted; KWOKNodeClass from
# kwok/apis/crds), and `karpenter-dra`: kwokdra/, the same provider whose GPU instance types
# predict their gpu.nvidia.com devices (ResourceSlice templates; tests/e2e/test_karpenter_dra.py).
# <bin> is ${GPU2DRA_BIN:-<repo>/.bin}. Karpenter v1.15 needs Go 1.26.9 or newer:
# GOTOOLCHAIN (go1.27.3 unless set) fetches it through the module proxy. Stamped over go.mod,
# go.sum, this script, kwokdra/main.go and `go version`: unchanged, a no-op. karpenter-dra
# shares every package but its main with karpenter: about 6 s more, cold or warm.
#   bash tests/karpenter/build.sh
# A new Karpenter: cd tests/karpenter && go get -tool sigs.k8s.io/karpenter/kwok@vX.Y.Z && go mod tidy
set -euo pipefail
now() { echo "${EPOCHREALTIME:-$(date +%s)}"; }
started="$(now)"
elapsed() { awk -v a="$started" -v b="$(now)" 'BEGIN {printf "%.2fs", b - a}'; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${GPU2DRA_BIN:-$repo/.bin}/karpenter"
cd "$here"
export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"

sha256() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi; }
command -v go >/dev/null || { echo "karpenter/build.sh: Go is required (https://go.dev/dl/)" >&2; exit 1; }
version="$(awk '$1 == "sigs.k8s.io/karpenter" {print $2; exit}' go.mod)"
want="$({ cat go.mod go.sum build.sh kwokdra/main.go; go version; } | sha256 | cut -d' ' -f1)"
if [[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$want" && -x "$out/karpenter" && -x "$out/karpenter-dra" ]]; then
    echo "Karpenter $version is current in $out (checked in $(elapsed))"
    exit 0
fi
rm -rf "$out"
mkdir -p "$out/crds"
echo "building Karpenter $version (kwok provider) into $out"
# The -X flag is what Karpenter's release sets: its build-info metric and its API client's
# user agent (karpenter/<version>) carry the version.
ldflags="-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=$version"
go build -mod=readonly -trimpath -o "$out/karpenter" -ldflags "$ldflags" sigs.k8s.io/karpenter/kwok
built="$(elapsed)"
go build -mod=readonly -trimpath -o "$out/karpenter-dra" -ldflags "$ldflags" ./kwokdra
echo "built karpenter in $built, karpenter-dra by $(elapsed)"
module="$(go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
cp "$module"/kwok/charts/crds/*.yaml "$module"/kwok/apis/crds/*.yaml "$out/crds/"
chmod -R u+w "$out/crds"
echo "$want" > "$out/.stamp"
echo "built Karpenter $version in $(elapsed)"
