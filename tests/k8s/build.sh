#!/usr/bin/env bash
# Build the Kubernetes control planes used by tests/e2e from source with Go. For each release
# (a folder tests/k8s/v<major>.<minor> with the go.mod that update-gomod.sh wrote; today v1.37,
# the newest, and v1.34, the oldest gpu2dra supports): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl into <bin>/<release>/. Then helm, once,
# into <bin>/, and Helm 4 as <bin>/helm4 (its post-renderers are plugins: helm-plugin/). <bin>
# is ${GPU2DRA_BIN:-<repo>/.bin}.
#   bash tests/k8s/build.sh              # every release
#   bash tests/k8s/build.sh v1.37        # only the releases named (and helm)
# A release builds the `tool` lines of its go.mod: each k8s.io/kubernetes/cmd/<name> becomes
# <bin>/<release>/<name>, go.etcd.io/etcd/server/v3 becomes etcd. To add one, e.g. kubelet:
#   cd tests/k8s/v1.37 && go mod edit -tool=k8s.io/kubernetes/cmd/kubelet && go mod tidy
# Only Go and the Go module proxy are needed.
# Cold (empty Go caches, 2 cores): ~14 min for all (v1.37 ~8 min, then v1.34 ~5 min, helm
# ~1.5 min, helm4 ~2.5 min); with warm caches ~1.5 min into an empty .bin; unchanged: a no-op.
# Each release has its own stamp, over its go.mod, go.sum, this script and `go version` (a new
# toolchain rebuilds); helm's covers this script, the newest release and `go version`.
set -euo pipefail
now() { echo "${EPOCHREALTIME:-$(date +%s)}"; }
started="$(now)"
elapsed() { awk -v a="${1:-$started}" -v b="$(now)" 'BEGIN {printf "%.2fs", b - a}'; }

HELM_VERSION=v3.20.2
HELM4_VERSION=v4.3.2

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${GPU2DRA_BIN:-$repo/.bin}"

cd "$here"
# Newest first; the newest one sets the Kubernetes version helm assumes.
mapfile -t known < <(find . -mindepth 2 -maxdepth 2 -path './v*/go.mod' | cut -d/ -f2 | sort -rV)
((${#known[@]})) || { echo "build.sh: no tests/k8s/v*/go.mod" >&2; exit 1; }
releases=("${@:-${known[@]}}")
for release in "${releases[@]}"; do
    [[ -f "$release/go.mod" ]] || { echo "build.sh: no release $release in $here" >&2; exit 1; }
done

sha256() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi; }
toolchain="$(go version 2>/dev/null || echo 'no Go')"
require_go() { command -v go >/dev/null || { echo "build.sh: Go is required (https://go.dev/dl/)" >&2; exit 1; }; }

all_present() {
    local dir="$1" name
    shift
    for name in "$@"; do
        [[ -x "$dir/$name" ]] || return 1
    done
}

# k8s.io/kubernetes v1.37.2 -> "v1.37.2 1 37"
kubernetes_version() {
    local version
    version="$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$1/go.mod")"
    [[ "$version" =~ ^v([0-9]+)\.([0-9]+)\. ]] || { echo "no k8s.io/kubernetes in $1/go.mod" >&2; exit 1; }
    echo "$version ${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
}

build_release() {
    local release="$1" from out="$bin/$1" want version major minor tool
    local k8s_cmds=() names=(etcd)
    from="$(now)"
    while read -r tool; do
        case "$tool" in
            k8s.io/kubernetes/cmd/*) k8s_cmds+=("$tool") names+=("${tool##*/}") ;;
            go.etcd.io/etcd/server/v3) ;;
            *) echo "build.sh: $release/go.mod: unknown tool $tool" >&2; exit 1 ;;
        esac
    done < <(awk '/^tool \($/ {b = 1; next} b && /^\)/ {b = 0} b {print $1} /^tool [^(]/ {print $2}' "$release/go.mod")
    want="$({ cat "$release/go.mod" "$release/go.sum" build.sh; echo "$toolchain"; } | sha256 | cut -d' ' -f1)"
    if [[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$want" ]] && all_present "$out" "${names[@]}"; then
        echo "Kubernetes $release binaries are current in $out ($toolchain; checked in $(elapsed "$from"))"
        return
    fi
    require_go
    mkdir -p "$out"
    rm -f "$out/.stamp"
    read -r version major minor < <(kubernetes_version "$release")

    # Without these, /version reports v0.0.0-master and kubectl/helm see a bogus server version
    # (the same -X flags as kube::version::ldflags in hack/lib/version.sh).
    local k8s_ldflags="-s -w" pkg
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        k8s_ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major"
        k8s_ldflags+=" -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    done

    echo "building Kubernetes $version into $out"
    (cd "$release" && go build -mod=readonly -trimpath -ldflags "$k8s_ldflags" -o "$out/" "${k8s_cmds[@]}")

    # etcd's own go.mod has replace directives, so it cannot be `go install`ed; build it from
    # this module (k8s.io/kubernetes already requires the matching etcd server version).
    echo "building etcd $(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$release/go.mod")"
    (cd "$release" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)

    all_present "$out" "${names[@]}" || { echo "build.sh: a binary is missing in $out" >&2; exit 1; }
    echo "$want" > "$out/.stamp"
    echo "built Kubernetes $version: ${names[*]} in $(elapsed "$from")"
}

# helm has no replace directives: install it with its own pinned dependencies (go.sum of helm,
# verified against the checksum database) rather than mixing them into a release's module.
# Same -X flags as helm's Makefile, so `helm template` assumes the newest Kubernetes minor.
build_helm() {
    local from want version major minor pkg helm_pkg=helm.sh/helm/v3
    from="$(now)"
    read -r version major minor < <(kubernetes_version "${known[0]}")
    want="$({ cat build.sh; echo "$version $toolchain"; } | sha256 | cut -d' ' -f1)"
    if [[ -f "$bin/.helm-stamp" && "$(cat "$bin/.helm-stamp")" == "$want" ]] && all_present "$bin" helm; then
        echo "helm $HELM_VERSION is current in $bin (checked in $(elapsed "$from"))"
        return
    fi
    require_go
    mkdir -p "$bin"
    rm -f "$bin/.helm-stamp"
    local helm_ldflags="-s -w -X $helm_pkg/internal/version.version=$HELM_VERSION"
    helm_ldflags+=" -X $helm_pkg/internal/version.gitTreeState=clean"
    for pkg in $helm_pkg/pkg/chartutil $helm_pkg/pkg/lint/rules; do
        helm_ldflags+=" -X $pkg.k8sVersionMajor=$major -X $pkg.k8sVersionMinor=$minor"
    done
    echo "building helm $HELM_VERSION (for Kubernetes $major.$minor)"
    GOBIN="$bin" go install -trimpath -ldflags "$helm_ldflags" "$helm_pkg/cmd/helm@$HELM_VERSION"
    all_present "$bin" helm || { echo "build.sh: helm is missing in $bin" >&2; exit 1; }
    echo "$want" > "$bin/.helm-stamp"
    echo "built helm in $(elapsed "$from")"
}

# Helm 4, as helm4: the binary is called helm too, so it is installed apart and renamed.
build_helm4() {
    local from want helm_pkg=helm.sh/helm/v4 scratch
    from="$(now)"
    want="$({ cat build.sh; echo "$toolchain"; } | sha256 | cut -d' ' -f1)"
    if [[ -f "$bin/.helm4-stamp" && "$(cat "$bin/.helm4-stamp")" == "$want" ]] && all_present "$bin" helm4; then
        echo "helm4 $HELM4_VERSION is current in $bin (checked in $(elapsed "$from"))"
        return
    fi
    require_go
    mkdir -p "$bin"
    rm -f "$bin/.helm4-stamp"
    scratch="$(mktemp -d)"
    echo "building helm $HELM4_VERSION as helm4"
    GOBIN="$scratch" go install -trimpath \
        -ldflags "-s -w -X $helm_pkg/internal/version.version=$HELM4_VERSION" \
        "$helm_pkg/cmd/helm@$HELM4_VERSION"
    mv "$scratch/helm" "$bin/helm4"
    rmdir "$scratch"
    echo "$want" > "$bin/.helm4-stamp"
    echo "built helm4 in $(elapsed "$from")"
}

for release in "${releases[@]}"; do
    build_release "$release"
done
build_helm
build_helm4
echo "control plane binaries for ${releases[*]} ready in $bin in $(elapsed)"
