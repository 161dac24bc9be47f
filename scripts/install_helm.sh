#!/usr/bin/env bash
# The pinned Helm into .tools/bin, for the chart's tests (about three minutes the first
# time on a machine, instant once the pinned version is there).
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/install_go_tool.sh" helm "${HELM_VERSION:-v3.22.0}" \
    helm.sh/helm/v3/cmd/helm helm.sh/helm/v3/internal/version.version \
    '"${TOOL}" version --template "{{.Version}}"'
