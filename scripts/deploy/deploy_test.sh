#!/usr/bin/env bash
# make deploy-test: podman, runc and mmdebstrap from Debian's packages when missing
# (as root), then scripts/deploy/deploy_test.py, bounded in time. Everything it
# starts it stops, also on failure or interruption.
set -euo pipefail
cd "$(dirname "$0")/../.."
missing=()
for tool in podman:podman runc:runc mmdebstrap:mmdebstrap newuidmap:uidmap slirp4netns:slirp4netns; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "make deploy-test: missing ${missing[*]} (apt-get install ${missing[*]}, as root)" >&2
        exit 1
    fi
    echo "make deploy-test: installing ${missing[*]}"
    timeout 600 apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -q \
        "${missing[@]}" >/dev/null
fi
if [ "$(id -u)" != 0 ]; then
    echo "make deploy-test: runs as root (rootful podman: named volumes owned by uid 65532)" >&2
    exit 1
fi
[ -x .venv/bin/python ] || { echo "make deploy-test: .venv is missing (make setup)" >&2; exit 1; }
export CONTAINERS_CONF=$PWD/scripts/deploy/containers.conf
export PYTHONPATH=$PWD
exec timeout --signal=TERM --kill-after=60 1500 .venv/bin/python scripts/deploy/deploy_test.py "$@"
