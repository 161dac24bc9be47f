#!/usr/bin/env bash
# Regenerates the Go stubs in clients/go/compactionv1 from protos/ with the
# pinned plugins (clients/go/buf.gen.yaml). Never edit the output by hand.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/plugins.sh"
install_plugins
cd "$REPO_ROOT"
rm -rf clients/go/compactionv1
"$(buf_bin)" generate --template clients/go/buf.gen.yaml
echo "generated clients/go/compactionv1"
