#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser tests (test/dashboard/, driven by
# playwright-core, which never downloads a browser); does nothing when it is already
# installed or EVORA_CHROMIUM names one.
set -euo pipefail
if [ -n "${EVORA_CHROMIUM:-}" ] || command -v chromium >/dev/null || [ -x /usr/bin/chromium ]; then exit 0; fi
sudo=$([ "$(id -u)" = 0 ] || echo sudo)
$sudo apt-get install -y -qq chromium >/dev/null || { $sudo apt-get update -qq && $sudo apt-get install -y -qq chromium >/dev/null; }
