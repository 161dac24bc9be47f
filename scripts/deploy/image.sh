#!/usr/bin/env bash
# make image: the project's wheel and its runtime dependencies' wheels built on the
# host (pip reaches the package index here, not inside a build), then the Dockerfile
# built offline from them. BASE_IMAGE and IMAGE override the defaults.
set -euo pipefail
source "$(dirname "$0")/engine.sh"
cd "$ROOT"
BASE_IMAGE=${BASE_IMAGE:-python:3.11-slim-bookworm}
IMAGE=${IMAGE:-compaction-sidecar:0.1.0}
PYTHON=${PYTHON:-.venv/bin/python}

# What .dockerignore let in before: the wheel is built from a copy, so that no
# build/ or egg-info lands in the tree.
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
cp pyproject.toml README.md "$src"/
cp -r sidecar "$src"/sidecar
find "$src" -name __pycache__ -prune -exec rm -rf {} +
rm -rf build/wheels
mkdir -p build/wheels
pip=(-m pip wheel --quiet --disable-pip-version-check --no-input --wheel-dir build/wheels)
"$PYTHON" "${pip[@]}" --no-deps "$src"
"$PYTHON" "${pip[@]}" build/wheels/compaction_sidecar-*.whl

echo "make image: $IMAGE from $BASE_IMAGE with $ENGINE"
case "$ENGINE" in
    buildah) build=(buildah build --network=none) ;;
    podman) build=(podman build --network=none) ;;
    *) build=(docker build --network=none) ;;
esac
# The wheels' digest as a build argument: the RUN that installs them from a bind mount
# is cached by its text and arguments, not by what the mount holds.
wheels=$(cat build/wheels/*.whl | sha256sum | cut -c1-16)
"${build[@]}" --build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "WHEELS=$wheels" -t "$IMAGE" -f Dockerfile .
case "$ENGINE" in
    buildah) size=$(buildah inspect --type image --format '{{.Docker.Size}}' "$IMAGE" 2>/dev/null || true) ;;
    *) size=$("$ENGINE" image inspect --format '{{.Size}}' "$IMAGE") ;;
esac
if [ -n "$size" ] && [ "$size" -gt 0 ] 2>/dev/null; then
    echo "make image: $IMAGE is $((size / 1000000)) MB"
fi
