# Sourced by the image scripts: ENGINE is the container engine to build with.
# Docker when its daemon answers, else podman, else buildah. Podman and buildah
# read scripts/deploy/containers.conf (runc, cgroupfs, ulimits within the host's).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$ROOT/scripts/deploy/containers.conf}
if [ -z "${ENGINE:-}" ]; then
    if command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1; then
        ENGINE=docker
    elif command -v podman >/dev/null; then
        ENGINE=podman
    elif command -v buildah >/dev/null; then
        ENGINE=buildah
    else
        echo "make image: no container engine (docker with a running daemon, podman or buildah)" >&2
        exit 1
    fi
fi
