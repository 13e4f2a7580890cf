#!/bin/bash
# The entrypoint of scripts/image.sh's stand-in for the postgres image (built where no container
# registry answers): the part of the official docker-entrypoint.sh that docker/compose.yaml relies
# on. On an empty PGDATA: initdb with POSTGRES_USER and POSTGRES_PASSWORD (local connections
# trusted, others scram-sha-256, as the official image sets them), POSTGRES_DB created, the
# *.sql and *.sh files of /docker-entrypoint-initdb.d run in name order against it. Then the server
# runs as the postgres user with the arguments given after `postgres`.
set -euo pipefail
PGDATA=${PGDATA:-/var/lib/postgresql/data}
export PGDATA
if [ "${1:-}" = postgres ]; then shift; fi
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" postgres "$@"
fi
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
sockets=/var/run/postgresql,/tmp
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    [ -n "${POSTGRES_PASSWORD:-}" ] || { echo "error: POSTGRES_PASSWORD is not set (the official image refuses to start without it too)" >&2; exit 1; }
    pwfile=$(mktemp)
    printf '%s' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    pg_ctl -w -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" start >/dev/null
    psql=(psql -v ON_ERROR_STOP=1 --no-psqlrc -h /var/run/postgresql -U "$POSTGRES_USER")
    if [ "$POSTGRES_DB" != postgres ]; then
        "${psql[@]}" -d postgres -c "CREATE DATABASE \"$POSTGRES_DB\"" >/dev/null
    fi
    for f in /docker-entrypoint-initdb.d/*; do
        case "$f" in
            *.sql) echo "running $f"; "${psql[@]}" -d "$POSTGRES_DB" -f "$f" >/dev/null ;;
            *.sh) echo "running $f"; . "$f" ;;
        esac
    done
    pg_ctl -w -m fast stop >/dev/null
    echo "PostgreSQL init process complete; ready for start up."
fi
exec postgres -c listen_addresses='*' -c unix_socket_directories="$sockets" "$@"
