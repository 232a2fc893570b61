#!/bin/sh
# The entrypoint of the local stand-in for the postgres image (Debian's PostgreSQL, built by
# e2e/scripts/build-kind-images.sh), reading what the chart gives it: POSTGRES_USER,
# POSTGRES_PASSWORD, POSTGRES_DB and PGDATA. On an empty PGDATA it makes the cluster (the user
# as its superuser, password logins over TCP from anywhere) and the database, then serves.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
if [ "$#" -gt 0 ] && [ "$1" != postgres ]; then exec "$@"; fi
[ "$#" -gt 0 ] && shift
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}"
  mkdir -p "$PGDATA" && chmod 0700 "$PGDATA"
  pw="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pw"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pw" -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pw"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres -q \
      -c "CREATE DATABASE \"$(printf '%s' "$POSTGRES_DB" | sed 's/"/""/g')\""
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
  echo "postgres-entrypoint: initialized $PGDATA (database $POSTGRES_DB, user $POSTGRES_USER)"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
