#!/usr/bin/env bash
# Installs the system packages the tests use (a real PostgreSQL server and client) when
# they are missing. Debian/Ubuntu; needs root or sudo. A no-op when already installed.
set -euo pipefail
have_pg() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v pg_dump >/dev/null; }
if have_pg; then exit 0; fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing PostgreSQL (server and client) with apt-get" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends postgresql postgresql-client >/dev/null
have_pg
