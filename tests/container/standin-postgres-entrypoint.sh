#!/bin/bash
# The official image's contract, in short: initialise PGDATA once with POSTGRES_USER,
# POSTGRES_PASSWORD and POSTGRES_DB, then run the server as the postgres user.
set -euo pipefail
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
user="${POSTGRES_USER:-postgres}" db="${POSTGRES_DB:-${POSTGRES_USER:-postgres}}"
chown -R postgres:postgres "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp) && printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile" && chown postgres "$pwfile"
    su postgres -c "initdb -D '$PGDATA' -U '$user' --encoding=UTF8 --locale=C.UTF-8 --pwfile='$pwfile' --auth-host=scram-sha-256 --auth-local=trust" >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    su postgres -c "pg_ctl -D '$PGDATA' -o '-c listen_addresses=' -w start" >/dev/null
    if [ "$db" != postgres ]; then
        su postgres -c "psql -U '$user' -d postgres -qc 'CREATE DATABASE \"$db\"'"
    fi
    su postgres -c "pg_ctl -D '$PGDATA' -m fast -w stop" >/dev/null
fi
exec su postgres -c "exec postgres -D '$PGDATA' -c listen_addresses='*'"
