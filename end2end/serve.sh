#!/usr/bin/env bash
# Started by Playwright (webServer): a fresh SQLite store, a fresh DLQ topic on the test broker
# holding the fixture dead letters, and the debug redrive server on 127.0.0.1:$1.
set -euo pipefail
port="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
brokers="${REDRIVE_TEST_KAFKA_BROKERS:?start the test broker first (make test does)}"
state="$(mktemp -d)"
topic="e2e_$(date +%s)_$$.DLT"
"$root/target/debug/produce-fixtures" "$brokers" "$topic" >/dev/null
export REDRIVE_DATABASE_URL="sqlite:$state/e2e.db" REDRIVE_KAFKA_BROKERS="$brokers" \
  REDRIVE_DLQ_TOPICS="$topic" REDRIVE_GROUP_ID="e2e-$$" REDRIVE_LISTEN="127.0.0.1:$port" \
  REDRIVE_SITE_ROOT="$root/target/site"
exec "$root/target/debug/redrive" serve
