#!/usr/bin/env bash
# Regenerate the Java stubs in clients/java/src/generated/java from protos/ with buf
# and clients/java/buf.gen.yaml. With --check, generate into a temporary folder
# instead and fail when the committed stubs differ (added, removed or stale files).
#
# Needs: Maven (fetches protoc from Maven Central into target/codegen), buf
# (BUF, default: the repository's node_modules/.bin/buf from `npm ci`), and
# grpc_java_plugin (Debian: protobuf-compiler-grpc-java-plugin, installed here
# when missing and running as root).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
buf="${BUF:-$root/node_modules/.bin/buf}"
grpc_plugin_deb="protobuf-compiler-grpc-java-plugin=1.41.3+ds-1"

if ! command -v grpc_java_plugin >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y -q "$grpc_plugin_deb" >/dev/null \
      || { apt-get update -q >/dev/null && apt-get install -y -q "$grpc_plugin_deb" >/dev/null; }
  else
    echo "gen.sh: grpc_java_plugin missing: apt-get install $grpc_plugin_deb" >&2
    exit 1
  fi
fi
mvn -B -q -f "$here/pom.xml" -Pcodegen generate-sources
chmod +x "$here/target/codegen/protoc"

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
