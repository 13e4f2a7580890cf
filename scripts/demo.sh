#!/usr/bin/env bash
# The pgoutbox demo: starts a throwaway PostgreSQL 15 and Kafka-protocol broker, creates the outbox
# table, runs the relay with examples/connector.properties, writes sample events in application
# transactions, shows them arriving in Kafka (topic, partition, key, headers, value), and stops
# everything it started.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/lib.sh"

bash "$here/install.sh" --demo
log "building pgoutbox (release)"
bash "$here/build-release.sh" --quiet
bin="${CARGO_TARGET_DIR:-$root/target}/release/pgoutbox"

work=$(mktemp -d /tmp/pgoutbox-demo.XXXXXX)
chmod 755 "$work"
relay_pid=
cleanup() {
    [ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null || true
    services_down "$work"
}
trap cleanup EXIT
services_up "$work"

psql_() { psql -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 "$@"; }
psql_ -f "$root/sql/outbox.sql"
psql_ -c "CREATE TABLE public.orders (id bigserial PRIMARY KEY, customer text NOT NULL, total numeric NOT NULL)"

log "starting the relay with examples/connector.properties"
"$bin" run --config "$root/examples/connector.properties" \
    --set database.port="$pg_port" --set bootstrap.servers="127.0.0.1:$broker_port" \
    2>"$work/relay.log" &
relay_pid=$!
for _ in $(seq 1 200); do grep -q "streaming" "$work/relay.log" 2>/dev/null && break; sleep 0.05; done
grep -q "streaming" "$work/relay.log" || { cat "$work/relay.log" >&2; die "relay did not start"; }

log "writing orders: each business row and its outbox event in one transaction (one rolled back)"
for i in 1 2 3; do
    psql_ <<SQL
BEGIN;
INSERT INTO public.orders (customer, total) VALUES ('customer-$i', $i * 10.5);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload)
VALUES (gen_random_uuid(), 'Order', 'order-$i', 'OrderCreated', json_build_object('orderId', $i, 'total', $i * 10.5)::jsonb);
COMMIT;
SQL
done
psql_ <<SQL
BEGIN;
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload)
VALUES (gen_random_uuid(), 'Customer', 'customer-1', 'CustomerUpdated', '{"name": "Ada"}');
COMMIT;
BEGIN;
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload)
VALUES (gen_random_uuid(), 'Order', 'order-99', 'OrderCreated', '{"never": "published"}');
ROLLBACK;
SQL

log "records in Kafka:"
"$bin" consume --bootstrap-servers "127.0.0.1:$broker_port" \
    --topic outbox.event.Order --topic outbox.event.Customer --count 4 --idle-ms 10000

log "stopping the relay (SIGTERM: waits for acknowledgements, confirms the final position)"
kill -TERM "$relay_pid"; wait "$relay_pid" || true; relay_pid=
log "slot after stop: $(psql_ -c "SELECT slot_name || ' confirmed_flush_lsn=' || confirmed_flush_lsn || ' current_wal=' || pg_current_wal_lsn() FROM pg_replication_slots")"
log "relay log:"; sed 's/^/    /' "$work/relay.log" >&2
