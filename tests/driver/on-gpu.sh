#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and driver: what NVIDIA's DRA driver would publish for it,
# from the inventory tests/driver/build.sh builds (its --real mode, the machine's
# libnvidia-ml.so.1), with what nvidia-smi says of the same GPUs, written to $OUT:
#   nvidia-smi-L.txt, nvidia-smi-q.txt          the GPUs, if nvidia-smi is there
#   nvidia-smi-mig-lgip.txt, -lgipp.txt         MIG profiles (IDs, memory) and placements
#   devices.json                                the devices, as the driver publishes them
#   devices-dynamic-mig.json                    the same under the DynamicMIG gate
#   slices-dynamic-mig.json                     its ResourceSlice specs (split, 1.35+)
#   times.txt                                   seconds per dump
# and prints a short summary. Reads only: it creates no MIG device and changes no mode.
#   OUT=/tmp/out bash tests/driver/on-gpu.sh .bin/driver/inventory [driver root]
# The driver root is where the plugin (its --container-driver-root) finds libnvidia-ml.so.1:
# under ROOT, ROOT/usr/lib64, ROOT/lib/x86_64-linux-gnu and the like (the driver's root.go).
# Without one, the first of / and the folders ldconfig lists for libnvidia-ml.so.1 (taken back
# to their root: /usr/local/nvidia/lib64 -> /usr/local/nvidia, as on GPU cloud images) that
# holds it.
set -uo pipefail
inventory="${1:?usage: OUT=DIR on-gpu.sh INVENTORY [DRIVER_ROOT]}"
out="${OUT:?set OUT to the folder for the results}"
mkdir -p "$out"

# The folders under a driver root where the driver's root.go looks for libnvidia-ml.so.1.
library_dirs=(/usr/lib64 /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /lib64 /lib/x86_64-linux-gnu /lib/aarch64-linux-gnu)
# has_nvml ROOT: whether the driver would find libnvidia-ml.so.1 under ROOT.
has_nvml() {
    local dir
    for dir in / "${library_dirs[@]}"; do
        [[ -e "${1%/}$dir/libnvidia-ml.so.1" ]] && return 0
    done
    return 1
}
# candidate_roots: /, then each folder ldconfig knows libnvidia-ml.so.1 in, taken back to its root.
candidate_roots() {
    local dir suffix root
    echo /
    command -v ldconfig >/dev/null || return 0
    ldconfig -p 2>/dev/null | awk '$1 == "libnvidia-ml.so.1" {print $NF}' | while read -r library; do
        dir="$(dirname "$library")"
        root="$dir"
        for suffix in "${library_dirs[@]}"; do
            if [[ "$dir" == *"$suffix" ]]; then root="${dir%"$suffix"}"; break; fi
        done
        echo "${root:-/}"
    done
}
if [[ $# -ge 2 ]]; then
    driver_root="$2"
else
    driver_root=""
    while read -r root; do
        if has_nvml "$root"; then driver_root="$root"; break; fi
    done < <(candidate_roots)
    if [[ -z "$driver_root" ]]; then
        echo "no libnvidia-ml.so.1 under / or the folders ldconfig lists; give the driver root" >&2
        driver_root=/
    fi
fi
echo "== driver root: $driver_root"

echo "== machine: $(uname -srm); $(ldd --version 2>&1 | head -1)"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi -L | tee "$out/nvidia-smi-L.txt"
    nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1
    nvidia-smi mig -lgip > "$out/nvidia-smi-mig-lgip.txt" 2>&1
    nvidia-smi mig -lgipp > "$out/nvidia-smi-mig-lgipp.txt" 2>&1
    nvidia-smi --query-gpu=index,name,memory.total,pci.bus_id,mig.mode.current,driver_version \
        --format=csv | tee "$out/nvidia-smi-query.csv"
else
    echo "no nvidia-smi on PATH"
fi

status=0
# dump NAME ARGS...: one run of the inventory into $out/NAME.json, timed.
dump() {
    local name="$1" start end
    shift
    start="$(date +%s.%N)"
    if "$inventory" --real --driver-root "$driver_root" "$@" > "$out/$name.json" 2> "$out/$name.err"; then
        end="$(date +%s.%N)"
        echo "$name $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.3f", b - a}')" >> "$out/times.txt"
    else
        echo "== $name FAILED:"; cat "$out/$name.err"; status=1
    fi
}
: > "$out/times.txt"
dump devices
dump devices-dynamic-mig --dynamic-mig
dump slices-dynamic-mig --dynamic-mig --slices
# With the driver's log, for a failure the dumps above do not explain.
"$inventory" --real --driver-root "$driver_root" -v > /dev/null 2> "$out/devices-verbose.log"

echo "== seconds per dump:"; cat "$out/times.txt"
for name in devices devices-dynamic-mig; do
    [[ -s "$out/$name.json" ]] || continue
    echo "== $name: $(grep -c '"name": "gpu-' "$out/$name.json") devices"
    grep -o '"name": "gpu-[^"]*"' "$out/$name.json" | cut -d'"' -f4 | head -40 | paste -sd' '
    grep -A1 -E '"(productName|architecture|brand|driverVersion|cudaDriverVersion|cudaComputeCapability|addressingMode|resource.kubernetes.io/pcieRoot)": \{' \
        "$out/$name.json" | grep -o '"\(string\|version\)": "[^"]*"' | sort | uniq -c
    grep -A1 '"memory": {' "$out/$name.json" | grep -o '"value": "[^"]*"' | sort | uniq -c
done
exit "$status"
