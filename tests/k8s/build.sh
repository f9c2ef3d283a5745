#!/usr/bin/env bash
# Build the Kubernetes control plane used by tests/e2e from source with Go:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and helm.
# Only Go and the Go module proxy are needed. Output: ${GPU2DRA_BIN:-<repo>/.bin}.
# Cold (empty Go caches, 2 cores): ~15 min; with warm caches ~40 s; unchanged inputs: no-op.
# The stamp covers go.mod, go.sum, this script and `go version`: a new toolchain rebuilds.
set -euo pipefail
started="${EPOCHREALTIME:-$(date +%s)}"
elapsed() { awk -v a="$started" -v b="${EPOCHREALTIME:-$(date +%s)}" 'BEGIN {printf "%.2fs", b - a}'; }

HELM_VERSION=v3.20.2

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${GPU2DRA_BIN:-$repo/.bin}"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl helm)
stamp="$bin/.stamp"

cd "$here"
sha256() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi; }
toolchain="$(go version 2>/dev/null || echo 'no Go')"
want="$({ cat go.mod go.sum build.sh; echo "$toolchain"; } | sha256 | cut -d' ' -f1)"

all_present() {
    local name
    for name in "${binaries[@]}"; do
        [[ -x "$bin/$name" ]] || return 1
    done
}

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && all_present; then
    echo "control plane binaries are current in $bin ($toolchain; checked in $(elapsed))"
    exit 0
fi

command -v go >/dev/null || { echo "build.sh: Go is required (https://go.dev/dl/)" >&2; exit 1; }
mkdir -p "$bin"
rm -f "$stamp"

# The version comes from go.mod, so bumping it there (update-gomod.sh) is enough.
k8s_version="$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' go.mod)"
[[ "$k8s_version" =~ ^v([0-9]+)\.([0-9]+)\. ]] || { echo "no k8s.io/kubernetes in go.mod" >&2; exit 1; }
k8s_major="${BASH_REMATCH[1]}"
k8s_minor="${BASH_REMATCH[2]}"

export CGO_ENABLED=0

# Without these, /version reports v0.0.0-master and kubectl/helm see a bogus server version
# (the same -X flags as kube::version::ldflags in hack/lib/version.sh).
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$k8s_major"
    k8s_ldflags+=" -X $pkg.gitMinor=$k8s_minor -X $pkg.gitTreeState=clean"
done

echo "building Kubernetes $k8s_version into $bin"
go build -mod=readonly -trimpath -ldflags "$k8s_ldflags" -o "$bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl

# etcd's own go.mod has replace directives, so it cannot be `go install`ed; build it from
# this module (k8s.io/kubernetes already requires the matching etcd server version).
echo "building etcd $(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' go.mod)"
go build -mod=readonly -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3

# helm has no replace directives: install it with its own pinned dependencies (go.sum of helm,
# verified against the checksum database) rather than mixing them into this module.
# Same -X flags as helm's Makefile, so `helm template` assumes this Kubernetes minor.
helm_pkg=helm.sh/helm/v3
helm_ldflags="-s -w -X $helm_pkg/internal/version.version=$HELM_VERSION"
helm_ldflags+=" -X $helm_pkg/internal/version.gitTreeState=clean"
for pkg in $helm_pkg/pkg/chartutil $helm_pkg/pkg/lint/rules; do
    helm_ldflags+=" -X $pkg.k8sVersionMajor=$k8s_major -X $pkg.k8sVersionMinor=$k8s_minor"
done
echo "building helm $HELM_VERSION"
GOBIN="$bin" go install -trimpath -ldflags "$helm_ldflags" "$helm_pkg/cmd/helm@$HELM_VERSION"

all_present || { echo "build.sh: a binary is missing in $bin" >&2; exit 1; }
echo "$want" > "$stamp"
echo "built ${binaries[*]} in $(elapsed)"
