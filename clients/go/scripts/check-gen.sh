#!/usr/bin/env bash
# Fails when the committed stubs in clients/go/compactionv1 differ from what
# the pinned plugins generate from protos/ now: regenerates into a temporary
# directory and diffs. Fix with clients/go/scripts/gen.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/plugins.sh"
install_plugins
cd "$REPO_ROOT"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$(buf_bin)" generate --template clients/go/buf.gen.yaml --output "$tmp"
if ! diff -ru clients/go/compactionv1 "$tmp/clients/go/compactionv1"; then
  echo "clients/go/compactionv1 is stale: run clients/go/scripts/gen.sh and commit the result" >&2
  exit 1
fi
echo "clients/go/compactionv1 is up to date"
