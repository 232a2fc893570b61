#!/usr/bin/env bash
# Installs the system packages the tests use when they are missing: a real PostgreSQL server
# and client, Chromium (a test opens Polyaxon's web UI in it, headless), nginx (the gateway
# pod's proxy, run on this machine by the local provider) and Redis (its exporter's test). Debian/Ubuntu; needs root or sudo.
# A no-op when already installed.
set -euo pipefail
have_pg() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v pg_dump >/dev/null; }
have_chromium() { command -v chromium >/dev/null; }
have_nginx() { command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; }
have_redis() { command -v redis-server >/dev/null; }
packages=()
have_pg || packages+=(postgresql postgresql-client)
have_chromium || packages+=(chromium)
have_nginx || packages+=(nginx)
have_redis || packages+=(redis-server)
if [ ${#packages[@]} -eq 0 ]; then exit 0; fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${packages[*]} with apt-get" >&2
$SUDO apt-get update -qq
# policy-rc.d 101: Debian's nginx and redis-server packages would start servers on ports 80 and
# 6379; the tests start their own.
policy=/usr/sbin/policy-rc.d; made_policy=""
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null; $SUDO chmod +x "$policy"; made_policy=1
  trap '$SUDO rm -f "$policy"' EXIT # a failed install must not leave every service start refused
fi
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
[ -z "$made_policy" ] || $SUDO rm -f "$policy"
have_pg && have_chromium && have_nginx && have_redis
