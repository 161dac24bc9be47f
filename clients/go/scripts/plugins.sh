#!/usr/bin/env bash
# Installs the pinned protoc plugins into <repo>/.tools/bin (skipped when the
# right versions are already there). Sourced by gen.sh and check-gen.sh.
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12      # google.golang.org/protobuf, same as go.mod
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2   # google.golang.org/grpc/cmd/protoc-gen-go-grpc

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
TOOLS_BIN="$REPO_ROOT/.tools/bin"

install_plugins() {
  if [[ "$("$TOOLS_BIN/protoc-gen-go" --version 2>/dev/null)" != "protoc-gen-go $PROTOC_GEN_GO_VERSION" ]]; then
    GOBIN="$TOOLS_BIN" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
  fi
  if [[ "$("$TOOLS_BIN/protoc-gen-go-grpc" --version 2>/dev/null)" != "protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION#v}" ]]; then
    GOBIN="$TOOLS_BIN" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
  fi
}

buf_bin() {
  local buf="$REPO_ROOT/node_modules/.bin/buf"
  if [[ ! -x "$buf" ]]; then
    echo "buf not found at $buf: run 'npm ci' at the repository root" >&2
    exit 1
  fi
  echo "$buf"
}
