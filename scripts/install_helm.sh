#!/usr/bin/env bash
# The pinned Helm into .tools/bin, for the chart's tests (about three minutes the first
# time on a machine, instant once the pinned version is there).
#
# Built as Helm's own Makefile builds a release: its default Kubernetes version (what
# `helm template` and `helm lint` check a chart's kubeVersion against when no
# --kube-version is given) is the one of the client-go it ships, 1.(client-go minor).
# A plain `go install` leaves Helm's fallback, v1.20.0, which this chart refuses; the
# check below (the flags recorded in the binary) rebuilds a Helm built that way.
set -euo pipefail
VERSION="${HELM_VERSION:-v3.22.0}"
kube=""
if command -v go >/dev/null; then  # without go, install_go_tool.sh says it needs it
    gomod="$(go mod download -json "helm.sh/helm/v3@${VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
    minor="$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "${gomod}")"
    [[ -n "${minor}" ]] || { echo "install helm: no client-go version in ${gomod}" >&2; exit 1; }
    for package in pkg/chartutil pkg/lint/rules; do
        kube+=" -X helm.sh/helm/v3/${package}.k8sVersionMajor=1"
        kube+=" -X helm.sh/helm/v3/${package}.k8sVersionMinor=${minor}"
    done
fi
exec bash "$(dirname "${BASH_SOURCE[0]}")/install_go_tool.sh" helm "${VERSION}" \
    helm.sh/helm/v3/cmd/helm helm.sh/helm/v3/internal/version.version \
    'go version -m "${TOOL}" | grep -q "chartutil.k8sVersionMinor=" &&
     "${TOOL}" version --template "{{.Version}}"' \
    "${kube}"
