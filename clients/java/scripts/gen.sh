#!/usr/bin/env bash
# Regenerate the Java stubs in clients/java/src/generated/java from protos/ with buf
# and clients/java/buf.gen.yaml. With --check, generate into a temporary folder
# instead and fail when the committed stubs differ (added, removed or stale files).
#
# Needs: Maven (fetches protoc and grpc-java's protoc-gen-grpc-java from Maven Central
# into target/codegen) and buf (BUF, default: the repository's node_modules/.bin/buf
# from `npm ci`). Nothing is installed system-wide, so it runs as any user.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
buf="${BUF:-$root/node_modules/.bin/buf}"

mvn -B -q -f "$here/pom.xml" -Pcodegen generate-sources
chmod +x "$here/target/codegen/protoc" "$here/target/codegen/protoc-gen-grpc-java"

cd "$root"
if [ "${1:-}" = "--check" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$buf" generate --template clients/java/buf.gen.yaml -o "$tmp"
  if ! diff -r "$tmp/clients/java/src/generated/java" clients/java/src/generated/java; then
    echo "gen.sh: clients/java/src/generated/java is stale: run clients/java/scripts/gen.sh" >&2
    exit 1
  fi
else
  "$buf" generate --template clients/java/buf.gen.yaml
fi
