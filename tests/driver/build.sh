#!/usr/bin/env bash
# Build the inventory of NVIDIA's DRA driver into ${GPU2DRA_BIN:-<repo>/.bin}/driver/inventory
# (and copy the driver's Helm chart to .../driver/chart):
# the driver's own kubelet-plugin package (cmd/gpu-kubelet-plugin of
# sigs.k8s.io/dra-driver-nvidia-gpu at the version go.mod pins), copied out of the Go module
# cache into build/driver, with inventory/*.go added to it and the plugin's main renamed, so
# that the binary prints the devices the plugin would publish (see inventory/inventory.go) on a
# mocked NVML (go-nvml's mock, fixed in inventory/mocknvml.go) or, with --real, the machine's.
# go.mod and go.sum pin the driver's version and the go-nvml release whose mock GPUs
# (pkg/nvml/mock/server and gpus: A100, H100, H200, B200) are copied into the driver's tree;
# the driver itself builds with its own go.mod and go.sum.
# The binary uses cgo (go-nvml dlopens libnvidia-ml.so.1, linked with
# --unresolved-symbols=ignore-in-object-files, which zig's linker refuses): built with the
# machine's cc, it runs where the glibc is as new as the symbol versions `objdump -T` lists.
# Stamped over go.mod, go.sum, inventory/*.go, fabricmanager/*.go, this script, the C compiler and `go version`:
# unchanged, a no-op.
#   bash tests/driver/build.sh
# A new driver or mock: cd tests/driver && go get sigs.k8s.io/dra-driver-nvidia-gpu@vX.Y.Z
# (or github.com/NVIDIA/go-nvml@vX.Y.Z), rebuild, and regenerate the golden files.
set -euo pipefail
now() { echo "${EPOCHREALTIME:-$(date +%s)}"; }
started="$(now)"
elapsed() { awk -v a="$started" -v b="$(now)" 'BEGIN {printf "%.2fs", b - a}'; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${GPU2DRA_BIN:-$repo/.bin}/driver"
cd "$here"

sha256() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi; }
command -v go >/dev/null || { echo "driver/build.sh: Go is required (https://go.dev/dl/)" >&2; exit 1; }
module=sigs.k8s.io/dra-driver-nvidia-gpu
version="$(awk -v m="$module" '$1 == m {print $2; exit}' go.mod)"
nvml_version="$(awk '$1 == "github.com/NVIDIA/go-nvml" {print $2; exit}' go.mod)"
[[ -n "$version" && -n "$nvml_version" ]] || { echo "driver/build.sh: no $module or go-nvml in go.mod" >&2; exit 1; }

compiler_version="$(cc --version 2>/dev/null | head -1 || echo 'no C compiler')"

# module_dir MODULE: its directory in the module cache (downloaded and checked against go.sum).
module_dir() {
    local dir
    dir="$(go mod download -json "$1" | awk -F'"' '$2 == "Dir" {print $4}')"
    [[ -d "$dir" ]] || { echo "driver/build.sh: could not download $1" >&2; exit 1; }
    echo "$dir"
}

want="$({ cat go.mod go.sum build.sh inventory/*.go fabricmanager/*.go; echo "$compiler_version"; go version; } | sha256 | cut -d' ' -f1)"
if [[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$want" && -x "$out/inventory" && -d "$out/chart" ]]; then
    echo "the driver's inventory ($module $version) is current in $out (checked in $(elapsed))"
    exit 0
fi
rm -rf "$out"
mkdir -p "$out"
echo "building the inventory of $module $version (mock of go-nvml $nvml_version; $compiler_version) into $out"
rm -rf build/driver
mkdir -p build
cp -R "$(module_dir "$module")" build/driver
chmod -R u+w build/driver
# Two modules the driver requires are not on the Go module proxy (v0.5.0: 403 "not available"):
# - k8s.io/kubernetes at a release candidate (for the kubelet's checkpoint manager only), built
#   instead at the release go.sum pins here (v1.37.0 for v0.5.0's v1.37.0-rc.0: the same go.mod,
#   so the same build list; pkg/kubelet/checkpointmanager is the same as in v1.37.0-rc.1);
# - github.com/NVIDIA/go-nvfm, the Fabric Manager's bindings: pkg/fabricmanager's client on
#   them is replaced by fabricmanager/client.go, which returns the package's own stub client.
#   Only the FabricManagerPartitioning gate (alpha, off, never on here) reaches it.
kube="$(awk '$1 == "k8s.io/kubernetes" && $2 !~ /\/go.mod$/ {print $2; exit}' go.sum)"
kube_driver="$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' build/driver/go.mod)"
if [[ -n "$kube" && -n "$kube_driver" && "$kube" != "$kube_driver" ]]; then
    module_dir "k8s.io/kubernetes@$kube" >/dev/null
    (cd build/driver && go mod edit -replace="k8s.io/kubernetes@$kube_driver=k8s.io/kubernetes@$kube")
    grep "^k8s.io/kubernetes $kube[ /]" go.sum >> build/driver/go.sum
fi
if [[ -f build/driver/pkg/fabricmanager/client_nvfm.go ]]; then
    rm -f build/driver/pkg/fabricmanager/client_nvfm*.go
    cp fabricmanager/client.go build/driver/pkg/fabricmanager/client_unavailable.go
fi
plugin=build/driver/cmd/gpu-kubelet-plugin
rm -f "$plugin"/*_test.go
# The inventory's main is the binary's; the plugin's server is left unreferenced.
sed -i 's/^func main() {$/func upstreamMain() {/' "$plugin/main.go"
grep -q '^func upstreamMain() {$' "$plugin/main.go" || { echo "driver/build.sh: no func main() in $plugin/main.go" >&2; exit 1; }
cp inventory/*.go "$plugin/"
# go-nvml's mock GPUs (pkg/nvml/mock/server and gpus) from the newer release, as packages of
# the driver's tree: the driver itself keeps the go-nvml its go.mod requires (a newer one has
# more compute-instance profiles than its go-nvlib knows, and enumeration fails).
mock="$(module_dir "github.com/NVIDIA/go-nvml")/pkg/nvml/mock"
for package in server gpus; do
    mkdir -p "build/driver/internal/nvmlmock/$package"
    cp "$mock/$package"/*.go "build/driver/internal/nvmlmock/$package/"
    rm -f "build/driver/internal/nvmlmock/$package"/*_test.go
done
chmod -R u+w build/driver/internal/nvmlmock
sed -i 's#"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"#"sigs.k8s.io/dra-driver-nvidia-gpu/internal/nvmlmock/gpus"#' \
    build/driver/internal/nvmlmock/*/*.go
(cd build/driver && CGO_ENABLED=1 CGO_CFLAGS="-O2 -Wno-deprecated-declarations" \
    go build -mod=readonly -trimpath \
    -ldflags "-s -w -X main.driverVersion=$version" -o "$out/inventory" ./cmd/gpu-kubelet-plugin)
# The driver's Helm chart beside it: the DeviceClasses it installs are the suite's
# (tests/driver/golden/deviceclasses.yaml, rendered from it again by a test).
cp -R build/driver/deployments/helm/dra-driver-nvidia-gpu "$out/chart"
echo "$want" > "$out/.stamp"
echo "built $out/inventory ($(du -m "$out/inventory" | cut -f1) MB) in $(elapsed)"
