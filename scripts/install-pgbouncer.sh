#!/usr/bin/env bash
# Installs pgbouncer (Debian's package) for test/server/pgbouncer.test.ts, which runs Evora
# through a pooler in transaction mode; does nothing when it is already installed.
set -euo pipefail
if command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ]; then exit 0; fi
sudo=$([ "$(id -u)" = 0 ] || echo sudo)
$sudo apt-get install -y -qq pgbouncer >/dev/null || { $sudo apt-get update -qq && $sudo apt-get install -y -qq pgbouncer >/dev/null; }
