#!/usr/bin/env bash
# The pinned grpcurl into .tools/bin, for the README's grpcurl lines, which tests/docs
# runs as printed (a few minutes the first time on two cores, instant afterwards).
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/install_go_tool.sh" grpcurl "${GRPCURL_VERSION:-v1.9.3}" \
    github.com/fullstorydev/grpcurl/cmd/grpcurl main.version \
    '"${TOOL}" -version 2>&1 | awk "{print \$2}"'
