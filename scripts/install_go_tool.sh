#!/usr/bin/env bash
# Install a pinned Go program into .tools/bin, built from source through the Go module
# proxy (release downloads are not reachable here). Idempotent: does nothing when the
# pinned version is already installed, so `make unit` pays the compile once per machine;
# Go's module and build caches make a reinstall after `rm -rf .tools` fast too.
#
#   install_go_tool.sh NAME VERSION PACKAGE VERSION_LDFLAG VERSION_COMMAND [LDFLAGS]
#
# VERSION_LDFLAG is the -X flag that stamps the version (without it the program reports
# a dev version and the check would rebuild on every run); VERSION_COMMAND, run by bash
# with $TOOL set to the binary, prints the version the binary reports (and nothing when
# it is not the build wanted); LDFLAGS are more -X flags, those a project's own release
# build sets.
set -euo pipefail

NAME="$1" VERSION="$2" PACKAGE="$3" VERSION_LDFLAG="$4" VERSION_COMMAND="$5" LDFLAGS="${6:-}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="${ROOT}/.tools/bin"
TOOL="${BIN_DIR}/${NAME}"

installed_version() {
    # a binary that fails to run counts as absent
    TOOL="${TOOL}" bash -c "${VERSION_COMMAND}" 2>/dev/null || true
}

if [[ -x "${TOOL}" && "$(installed_version)" == "${VERSION}" ]]; then
    exit 0
fi

command -v go >/dev/null || { echo "install ${NAME}: needs the go command (Go >= 1.24)" >&2; exit 1; }

mkdir -p "${BIN_DIR}"
echo "install ${NAME}: building ${NAME} ${VERSION} into ${BIN_DIR} (a few minutes the first time)" >&2
GOBIN="${BIN_DIR}" CGO_ENABLED=0 go install -ldflags "-X ${VERSION_LDFLAG}=${VERSION} ${LDFLAGS}" \
    "${PACKAGE}@${VERSION}"

actual="$(installed_version)"
if [[ "${actual}" != "${VERSION}" ]]; then
    echo "install ${NAME}: installed ${NAME} reports ${actual:-nothing}, expected ${VERSION}" >&2
    exit 1
fi
echo "install ${NAME}: ${NAME} ${actual} at ${TOOL}" >&2
