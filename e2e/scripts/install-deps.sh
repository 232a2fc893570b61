#!/usr/bin/env bash
# Installs the system packages the tests use when they are missing: a real PostgreSQL server
# and client, and Chromium (a test opens Polyaxon's web UI in it, headless). Debian/Ubuntu;
# needs root or sudo. A no-op when already installed.
set -euo pipefail
have_pg() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v pg_dump >/dev/null; }
have_chromium() { command -v chromium >/dev/null; }
packages=()
have_pg || packages+=(postgresql postgresql-client)
have_chromium || packages+=(chromium)
if [ ${#packages[@]} -eq 0 ]; then exit 0; fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${packages[*]} with apt-get" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
have_pg && have_chromium
