#!/usr/bin/env bash
# Started by Playwright (webServer): a fresh SQLite store, a fresh DLQ topic on the test broker
# holding the fixture dead letters, three users (tests/helpers.ts: admin, operator `oncall`,
# viewer `watcher`), and the debug redrive server on 127.0.0.1:$1.
set -euo pipefail
port="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
brokers="${REDRIVE_TEST_KAFKA_BROKERS:?start the test broker first (make test does)}"
redrive="$root/target/debug/redrive"
state="$(mktemp -d)"
topic="e2e_$(date +%s)_$$.DLT"
"$root/target/debug/produce-fixtures" "$brokers" "$topic" >/dev/null
export REDRIVE_DATABASE_URL="sqlite:$state/e2e.db" REDRIVE_KAFKA_BROKERS="$brokers" \
  REDRIVE_DLQ_TOPICS="$topic" REDRIVE_GROUP_ID="e2e-$$" REDRIVE_LISTEN="127.0.0.1:$port" \
  REDRIVE_SITE_ROOT="$root/target/site"
# Alert rules for tests/alerts.spec.ts: its webhook receiver listens on port + 1.
cat >"$state/redrive.toml" <<TOML
[alerts]
interval_ms = 500
notify_max_attempts = 10
notify_backoff_base_ms = 200
notify_backoff_max_ms = 2000

[alerts.notifiers.e2e-hook]
kind = "webhook"
url = "http://127.0.0.1:$((port + 1))/hook"
secret = "e2e-webhook-secret"

[[alerts.rules]]
name = "e2e-depth"
kind = "dlq_size"
threshold = 0
dlq_topic = "$topic"

[[alerts.rules]]
name = "e2e-quarantine"
kind = "quarantined"

# Rule set version 1 for tests/automation.spec.ts, installed by (config) at start-up: one
# transient rule for timeouts of a topic no fixture uses (the fixtures keep their tiers).
[automation]
default_tier = "manual"

[[automation.rule]]
name = "e2e-timeouts"
tier = "transient"
match.dlq_topics = ["e2e-llm.dlq"]
match.error_classes = ["*TimeoutException"]
schedule = { every = "10m", max_attempts = 3 }

# Single sign-on for tests/sso.spec.ts: the provider Playwright starts on port + 100
# (testkit/oidc/provider.mjs; its client and accounts are there).
[oidc]
issuer_url = "http://127.0.0.1:$((port + 100))"
client_id = "redrive"
client_secret = "redrive-test-secret"
redirect_url = "http://127.0.0.1:$port/auth/oidc/callback"
role_mapping = { "redrive-admins" = "admin", "oncall" = "operator" }
TOML
export REDRIVE_CONFIG="$state/redrive.toml"
# The users exist before the server starts, so no test can race their creation. (With users
# in the store, a REDRIVE_ADMIN_USER would be ignored: the admin is added here too.) The store
# does not exist yet: `--create` makes it (the store commands refuse a missing file without it).
add_user() { printf '%s' "$3" | "$redrive" user add "$1" --role "$2" --password-stdin --create >/dev/null; }
add_user admin admin e2e-admin-password
add_user oncall operator e2e-operator-password
add_user watcher viewer e2e-viewer-password
exec "$redrive" serve
