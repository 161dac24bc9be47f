#!/usr/bin/env bash
# make base-image: a base for the Dockerfile built from Debian's packages with
# mmdebstrap, for machines that reach Debian's mirror but no image registry.
# Python 3.11 and its venv module on bookworm's minimal base, no apt lists or caches.
set -euo pipefail
source "$(dirname "$0")/engine.sh"
BASE_IMAGE=${BASE_IMAGE:-compaction-base:bookworm}
command -v mmdebstrap >/dev/null || { echo "make base-image: mmdebstrap is missing (apt-get install mmdebstrap)" >&2; exit 1; }
tarball=$(mktemp --suffix=.tar)
trap 'rm -f "$tarball"' EXIT
mmdebstrap --quiet --variant=minbase --include=python3,python3-venv \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$tarball"
case "$ENGINE" in
    buildah) echo "make base-image: import needs docker or podman" >&2; exit 1 ;;
    *) "$ENGINE" import "$tarball" "$BASE_IMAGE" >/dev/null ;;
esac
echo "make base-image: $BASE_IMAGE"
