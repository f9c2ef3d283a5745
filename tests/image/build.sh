#!/usr/bin/env bash
# Build gpu2dra's image from the Dockerfile, without a Docker engine or a registry, into
# ${GPU2DRA_BIN:-<repo>/.bin}/image/gpu2dra.tar (a docker-archive of localhost/gpu2dra:<tag>):
#   bash tests/image/build.sh [TAG]        # TAG defaults to the package version
# The Dockerfile's base, python:3.11-slim-bookworm, is made here from Debian's packages
# (mmdebstrap: Debian's Python 3.11 with the same paths the Dockerfile uses) and the
# Dockerfile itself is built by buildah, so the image tests run is the image users run. Then
#   ctr -n k8s.io images import .bin/image/gpu2dra.tar       # into a node's containerd
# loads it where no registry is reachable (air-gapped clusters). Root only; installs buildah and
# mmdebstrap from Debian when missing. Stamped: the base over this script, the image over the
# Dockerfile, constraints.txt, pyproject.toml, README.md, app/ and the tag; unchanged, a no-op.
set -euo pipefail
started="${EPOCHREALTIME:-$(date +%s)}"
elapsed() { awk -v a="$started" -v b="${EPOCHREALTIME:-$(date +%s)}" 'BEGIN {printf "%.1fs", b - a}'; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${GPU2DRA_BIN:-$repo/.bin}/image"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/pyproject.toml")"
tag="${1:-$version}"
# A fixed time for every file and layer: the same inputs give the same image.
export SOURCE_DATE_EPOCH=1767225600  # 2026-01-01
base_name=docker.io/library/python:3.11-slim-bookworm
store=(--root "$out/store" --runroot "$out/run" --storage-driver overlay)

[[ "$(id -u)" == 0 ]] || { echo "image/build.sh: needs root (buildah's store, mmdebstrap)" >&2; exit 1; }
sha256() { sha256sum | cut -d' ' -f1; }
declare -A packages=([buildah]=/usr/bin/buildah [mmdebstrap]=/usr/bin/mmdebstrap [skopeo]=/usr/bin/skopeo)
missing=()
for package in "${!packages[@]}"; do [[ -e "${packages[$package]}" ]] || missing+=("$package"); done
if ((${#missing[@]})); then
    echo "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
mkdir -p "$out"

# -- the base: what python:3.11-slim-bookworm holds, from Debian's packages ------------------
make_base() {
    # debian:bookworm-slim's dpkg excludes (docs, man pages, locales), the copyrights kept.
    local excludes=() path
    for path in doc man info groff lintian linda locale; do
        excludes+=(--dpkgopt="path-exclude=/usr/share/$path/*")
    done
    # --skip=cleanup/apt/lists: mmdebstrap's own cleanup would empty the host's apt lists.
    mmdebstrap --quiet --variant=minbase --mode=root --format=tar \
        --skip=cleanup/apt/lists \
        --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        "${excludes[@]}" --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --include=python3.11,python3.11-venv,ca-certificates,netbase,tzdata \
        --customize-hook='for n in python python3 python3.11; do ln -sf /usr/bin/python3.11 "$1/usr/local/bin/$n"; done' \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
        bookworm "$1" \
        "deb http://deb.debian.org/debian bookworm main" \
        "deb http://deb.debian.org/debian bookworm-updates main" \
        "deb http://deb.debian.org/debian-security bookworm-security main"
}

# containers/storage leaves its overlay directory, and any container's rootfs, mounted: this
# script leaves the host's mounts as it found them.
unmount_store() {
    local point
    { grep -F " $out/store" /proc/self/mountinfo || true; } | awk '{print $5}' | sort -r |
        while read -r point; do umount "$point" 2>/dev/null || umount -l "$point"; done
}
trap unmount_store EXIT

base_want="$(declare -f make_base | sha256)"
if [[ ! -s "$out/base.tar" || "$(cat "$out/.base-stamp" 2>/dev/null)" != "$base_want" ]]; then
    echo "making the base image from Debian packages ($(elapsed))"
    rm -f "$out/.base-stamp" "$out/base.tar"
    if ! make_base "$out/base.tar" > "$out/base.log" 2>&1; then
        tail -n 30 "$out/base.log" >&2
        echo "image/build.sh: mmdebstrap failed (log: $out/base.log)" >&2
        exit 1
    fi
    unmount_store
    rm -rf "$out/store" "$out/run"  # a new base: the layers built on the old one go
    echo "$base_want" > "$out/.base-stamp"
fi
if ! buildah "${store[@]}" inspect --type image "$base_name" >/dev/null 2>&1; then
    container="$(buildah "${store[@]}" from --pull=never scratch)"
    buildah "${store[@]}" add --quiet "$container" "$out/base.tar" / >/dev/null
    buildah "${store[@]}" config --env PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
        --env LANG=C.UTF-8 --cmd python3 --os linux --arch amd64 "$container"
    buildah "${store[@]}" commit --quiet --timestamp "$SOURCE_DATE_EPOCH" --rm "$container" "$base_name" >/dev/null
fi

# -- the image, from the Dockerfile ------------------------------------------------------------
cd "$repo"
want="$({ cat Dockerfile constraints.txt pyproject.toml README.md "$here/build.sh"
    echo "$tag $base_want $(git rev-parse HEAD 2>/dev/null)"
    find app -type f -name '*.py' -print0 | sort -z | xargs -0 sha256sum; } | sha256)"
if [[ -s "$out/gpu2dra.tar" && "$(cat "$out/.stamp" 2>/dev/null)" == "$want" ]]; then
    echo "image localhost/gpu2dra:$tag is current in $out/gpu2dra.tar (checked in $(elapsed))"
    exit 0
fi
rm -f "$out/.stamp"
# pip inside the build trusts what this host trusts (a proxy's certificate, an index).
mounts=()
for file in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do
    [[ -f "$file" ]] && mounts+=(-v "$file:$file:ro")
done
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
echo "building localhost/gpu2dra:$tag from the Dockerfile ($(elapsed))"
buildah "${store[@]}" bud --quiet --pull=never --isolation=chroot --layers \
    --timestamp "$SOURCE_DATE_EPOCH" "${mounts[@]}" \
    --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
    -f Dockerfile -t "localhost/gpu2dra:$tag" . >/dev/null
rm -f "$out/gpu2dra.tar"
buildah "${store[@]}" push --quiet "localhost/gpu2dra:$tag" \
    "docker-archive:$out/gpu2dra.tar:localhost/gpu2dra:$tag"
buildah "${store[@]}" rm --all >/dev/null
echo "$want" > "$out/.stamp"

echo "built localhost/gpu2dra:$tag into $out/gpu2dra.tar ($(du -m "$out/gpu2dra.tar" | cut -f1) MB) in $(elapsed)"
