#!/usr/bin/env bash
# Installs the system packages the tests use when they are missing: a real PostgreSQL server
# and client, Chromium (a test opens Polyaxon's web UI in it, headless) and nginx (the gateway
# pod's proxy, run on this machine by the local provider). Debian/Ubuntu; needs root or sudo.
# A no-op when already installed.
set -euo pipefail
have_pg() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v pg_dump >/dev/null; }
have_chromium() { command -v chromium >/dev/null; }
have_nginx() { command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; }
packages=()
have_pg || packages+=(postgresql postgresql-client)
have_chromium || packages+=(chromium)
have_nginx || packages+=(nginx)
if [ ${#packages[@]} -eq 0 ]; then exit 0; fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${packages[*]} with apt-get" >&2
$SUDO apt-get update -qq
# policy-rc.d 101: Debian's nginx package would start a server on port 80; the tests start
# their own.
policy=/usr/sbin/policy-rc.d; made_policy=""
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null; $SUDO chmod +x "$policy"; made_policy=1
  trap '$SUDO rm -f "$policy"' EXIT # a failed install must not leave every service start refused
fi
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
[ -z "$made_policy" ] || $SUDO rm -f "$policy"
have_pg && have_chromium && have_nginx
