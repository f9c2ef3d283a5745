#!/usr/bin/env bash
# Build the real node of tests/e2e/test_node.py into ${GPU2DRA_BIN:-<repo>/.bin}/node:
#   containerd, containerd-shim-runc-v2, ctr   containerd v2 with CDI (containerd/go.mod)
#   v<major>.<minor>/kubelet,                  the kubelet, the fake NVIDIA DRA plugin and the
#   v<major>.<minor>/gpu-kubelet-plugin,       fake NVIDIA device plugin (plugin/gpu-device-
#   v<major>.<minor>/gpu-device-plugin         plugin/) of each release: plugin/go.mod (the
#                                              newest) and plugin/v*.mod (older ones, built
#                                              with -modfile)
#   images/pause.tar, images/busybox.tar       localhost/pause:1 and localhost/busybox:1
# and installs what it needs from Debian when missing (runc, the CNI plugins, a static
# busybox, umoci, skopeo, gcc; root only). Go builds use only the Go module proxy.
# A release is one file: `plugin/update-gomod.sh 1.37.2` regenerates plugin/go.mod,
# `plugin/update-gomod.sh 1.34.4 v1.34.mod` an older one. Unchanged inputs: a no-op (the stamp
# covers the Go modules, the plugins' sources, pause.c, this script and `go version`).
set -euo pipefail
started="${EPOCHREALTIME:-$(date +%s)}"
elapsed() { awk -v a="$started" -v b="${EPOCHREALTIME:-$(date +%s)}" 'BEGIN {printf "%.2fs", b - a}'; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${GPU2DRA_BIN:-$repo/.bin}/node"
stamp="$bin/.stamp"
binaries=(containerd containerd-shim-runc-v2 ctr)
kubelet_binaries=(kubelet gpu-kubelet-plugin gpu-device-plugin)
images=(pause busybox)
# Debian packages, each with a file that shows it is installed.
declare -A packages=(
    [runc]=/usr/sbin/runc
    [containernetworking-plugins]=/usr/lib/cni/bridge
    [busybox-static]=/bin/busybox
    [umoci]=/usr/bin/umoci
    [skopeo]=/usr/bin/skopeo
    [gcc]=/usr/bin/gcc
    [libc6-dev]=/usr/lib/x86_64-linux-gnu/libc.a
)

cd "$here"
sha256() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi; }
toolchain="$(go version 2>/dev/null || echo 'no Go')"
modfiles=(plugin/go.mod plugin/v*.mod)
# kubernetes_version MODFILE: the k8s.io/kubernetes version it requires, e.g. v1.37.2.
kubernetes_version() { awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$1"; }
releases=()
for modfile in "${modfiles[@]}"; do
    [[ "$(kubernetes_version "$modfile")" =~ ^(v[0-9]+\.[0-9]+)\. ]] \
        || { echo "no k8s.io/kubernetes in $modfile" >&2; exit 1; }
    releases+=("${BASH_REMATCH[1]}")
done
want="$({ cat build.sh pause.c containerd/go.mod containerd/go.sum plugin/*.mod plugin/*.sum \
    plugin/*.go plugin/*/*.go; echo "$toolchain"; } | sha256 | cut -d' ' -f1)"

all_present() {
    local name
    local release
    for name in "${binaries[@]}"; do [[ -x "$bin/$name" ]] || return 1; done
    for release in "${releases[@]}"; do
        for name in "${kubelet_binaries[@]}"; do [[ -x "$bin/$release/$name" ]] || return 1; done
    done
    for name in "${images[@]}"; do [[ -s "$bin/images/$name.tar" ]] || return 1; done
    for name in "${packages[@]}"; do [[ -e "$name" ]] || return 1; done
}

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && all_present; then
    echo "node binaries are current in $bin ($toolchain; checked in $(elapsed))"
    exit 0
fi

missing=()
for package in "${!packages[@]}"; do
    [[ -e "${packages[$package]}" ]] || missing+=("$package")
done
if ((${#missing[@]})); then
    [[ "$(id -u)" == 0 ]] || { echo "build.sh: install ${missing[*]} (needs root)" >&2; exit 1; }
    echo "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

command -v go >/dev/null || { echo "build.sh: Go is required (https://go.dev/dl/)" >&2; exit 1; }
mkdir -p "$bin/images"
rm -f "$stamp"
export CGO_ENABLED=0

containerd_version="$(awk '$1 == "github.com/containerd/containerd/v2" {print $2; exit}' containerd/go.mod)"
echo "building containerd $containerd_version ($(elapsed))"
(cd containerd && go build -mod=readonly -trimpath \
    -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version" \
    -o "$bin/" github.com/containerd/containerd/v2/cmd/{containerd,containerd-shim-runc-v2,ctr})

# build_kubelet MODFILE RELEASE: the kubelet and both plugins of MODFILE's release.
build_kubelet() {
    local modfile="${1#plugin/}" release="$2" version major minor ldflags tags="" pkg
    version="$(kubernetes_version "plugin/$modfile")"
    [[ "$version" =~ ^v([0-9]+)\.([0-9]+)\. ]]
    major="${BASH_REMATCH[1]}"
    minor="${BASH_REMATCH[2]}"
    ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major"
        ldflags+=" -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    done
    # k8s.io/dynamic-resource-allocation v0.37 added DRAPlugin.WatchHealthStatus (plugin/health.go).
    ((minor < 37)) && tags="k8s_pre137"
    echo "building kubelet $version, gpu-kubelet-plugin and gpu-device-plugin into $release/ ($(elapsed))"
    mkdir -p "$bin/$release"
    (cd plugin && go build -modfile="$modfile" -mod=readonly -trimpath -tags "$tags" \
        -ldflags "$ldflags" -o "$bin/$release/" k8s.io/kubernetes/cmd/kubelet . ./gpu-device-plugin)
}
for i in "${!modfiles[@]}"; do build_kubelet "${modfiles[$i]}" "${releases[$i]}"; done
# Before each release had its own folder, one kubelet and plugin lay in $bin itself.
rm -f "${kubelet_binaries[@]/#/$bin/}"

echo "building images ($(elapsed))"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
gcc -static -Os -o "$scratch/pause" pause.c
# image NAME CMD FILES...: an OCI image whose root holds FILES, saved as images/NAME.tar
# (docker-archive, tagged localhost/NAME:1, for `ctr images import`).
image() {
    local name="$1" cmd="$2" layout="$scratch/oci" bundle="$scratch/bundle-$1"
    shift 2
    [[ -d "$layout" ]] || umoci init --layout "$layout"
    umoci new --image "$layout:$name"
    umoci unpack --image "$layout:$name" "$bundle"
    "$@" "$bundle/rootfs"
    umoci repack --image "$layout:$name" "$bundle"
    umoci config --image "$layout:$name" --config.cmd "$cmd" --os linux --architecture "$(go env GOARCH)"
    rm -f "$bin/images/$name.tar"
    skopeo copy --quiet "oci:$layout:$name" "docker-archive:$bin/images/$name.tar:localhost/$name:1"
}
pause_rootfs() { install -m 0755 "$scratch/pause" "$1/pause"; }
busybox_rootfs() {
    local applet
    mkdir -p "$1/bin" "$1/tmp" "$1/etc"
    install -m 0755 /bin/busybox "$1/bin/busybox"
    for applet in $(/bin/busybox --list); do
        [[ -e "$1/bin/$applet" ]] || ln -s busybox "$1/bin/$applet"
    done
}
image pause /pause pause_rootfs
image busybox sh busybox_rootfs

all_present || { echo "build.sh: something is missing in $bin" >&2; exit 1; }
echo "$want" > "$stamp"
echo "built ${binaries[*]}, ${kubelet_binaries[*]} of ${releases[*]} and images ${images[*]} in $(elapsed)"
