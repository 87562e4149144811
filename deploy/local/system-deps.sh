#!/usr/bin/env bash
# Installs the Debian packages the full test suite needs when they are missing: redis-server for the
# store, Java 17 and Maven to run Apache Kafka from its Maven Central jars, kcat for the test that
# publishes the documented kcat example (docs/events.md), curl for the metrics commands of
# docs/operations.md (tests/docs runs every command the docs show; its `kubectl kustomize` uses the
# kubectl of the machine image, which Debian does not package), openssl for the throwaway
# certificates of the TLS tests, chromium for the web dashboard's browser tests (Playwright drives
# the system browser), npm (and node) for the official AsyncAPI parser, etcd-server as the store of
# the local Kubernetes API servers (built from source with Go, which the machine image has). Needs
# root (apt).
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v npm >/dev/null 2>&1 || missing+=(npm)  # the AsyncAPI parser the tests run (make asyncapi-parser)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)  # the metric checks' tests query a real one (CHK-2)
ls /usr/lib/jvm/java-17-openjdk-*/bin/java >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing ${missing[*]} with apt-get" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
