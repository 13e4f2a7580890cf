#!/usr/bin/env bash
# Runs pgoutbox's whole test suite on this machine: installs what is missing (PostgreSQL 15, the tansu
# broker), starts a throwaway PostgreSQL and broker on free ports, runs every test against them over
# real sockets, and stops what it started.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/lib.sh"

bash "$here/install.sh"

work=$(mktemp -d /tmp/pgoutbox-test.XXXXXX)
chmod 755 "$work"
cleanup() {
    broker_stop "$work/broker"
    pg_stop "$work/pg" immediate
    rm -rf "$work"
}
trap cleanup EXIT

pg_port=$(free_port)
broker_port=$(free_port)
pg_start "$work/pg" "$pg_port"
broker_start "$work/broker" "$broker_port"
export PGOUTBOX_TEST_PG_PORT=$pg_port
export PGOUTBOX_TEST_TLS_DIR=$work/pg/tls
export PGOUTBOX_TEST_BROKER=127.0.0.1:$broker_port
export PGOUTBOX_TEST_SCRIPTS=$here
log "PostgreSQL on 127.0.0.1:$pg_port, broker on 127.0.0.1:$broker_port"

cd "$root"
start=$(date +%s)
cargo test --locked --all-targets -- --nocapture "$@"
log "test suite took $(( $(date +%s) - start ))s"
