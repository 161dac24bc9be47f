#!/usr/bin/env bash
# Install the pinned Helm into .tools/bin, built from source through the Go module
# proxy (the only way to get it here: release downloads are not reachable).
# Idempotent: does nothing when the pinned version is already installed, so
# `make unit` pays the few-minute compile once per machine; Go's module and build
# caches make a reinstall after `rm -rf .tools` fast too.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="${ROOT}/.tools/bin"
HELM="${BIN_DIR}/helm"

installed_version() {
    # `helm version --template` prints e.g. "v3.22.0"; a binary that fails to run
    # counts as absent.
    "${HELM}" version --template '{{.Version}}' 2>/dev/null || true
}

if [[ -x "${HELM}" && "$(installed_version)" == "${HELM_VERSION}" ]]; then
    exit 0
fi

command -v go >/dev/null || { echo "install_helm.sh: needs the go command (Go >= 1.24)" >&2; exit 1; }

mkdir -p "${BIN_DIR}"
echo "install_helm.sh: building helm ${HELM_VERSION} into ${BIN_DIR} (a few minutes the first time)" >&2
# Version is stamped by ldflags in Helm's own Makefile; without it `helm version`
# reports a dev version and the check above would rebuild on every run.
GOBIN="${BIN_DIR}" CGO_ENABLED=0 go install \
    -ldflags "-X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
    "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"

actual="$(installed_version)"
if [[ "${actual}" != "${HELM_VERSION}" ]]; then
    echo "install_helm.sh: installed helm reports ${actual:-nothing}, expected ${HELM_VERSION}" >&2
    exit 1
fi
echo "install_helm.sh: helm ${actual} at ${HELM}" >&2
