#!/usr/bin/env bash
# Builds pgoutbox's container image from docker/Dockerfile with podman, runs it, and checks what an
# operator relies on. Not part of the test suite (a release build from scratch takes longer than CI's
# budget leaves); run it before every change to docker/, the worker, the build scripts or the
# dependencies.
#   scripts/image.sh          build, then check
#   scripts/image.sh build    build only
#   scripts/image.sh check    check the image built before
#   scripts/image.sh bases    pull or make the two base images only
#   scripts/image.sh compose  run docker/compose.yaml's quickstart (see "The compose quickstart" below)
#   scripts/image.sh standins pull or make the quickstart's third-party images only
# PGOUTBOX_IMAGE names the image (default localhost/pgoutbox:dev).
#
# Base images. The Dockerfile builds FROM rust:1.95-bookworm and takes the runtime's few files (glibc,
# bash, the CA bundle) from debian:bookworm-slim into an image FROM scratch. Where
# a container registry is reachable, podman pulls them. Where none is (these machines resolve no
# registry host), the two are made here from Debian's packages, as their publishers make them, and
# tagged with the names the Dockerfile asks for: debian:bookworm-slim is mmdebstrap's minbase of
# bookworm without manuals, documentation (copyright files kept) and translations, as the official
# slim variant is; rust:1.95-bookworm is bookworm with the build tools the official image carries
# (buildpack-deps: compilers, perl, make, pkg-config, curl, libcurl and OpenSSL headers) and Rust
# 1.95.0 installed by rustup from static.rust-lang.org into /usr/local/{rustup,cargo}, on PATH. They
# are labelled org.pgoutbox.base=local, so nobody mistakes them for the published images.
#
# What is checked, against PostgreSQL 15 and a one-node Apache Kafka started on the host (the
# container shares the host's network):
#   the image runs as user 10001, declares its HEALTHCHECK, and its size (uncompressed, and gzipped
#   as a registry would store it);
#   the default command is the Connect worker: configured only through Debezium's image variables
#   (BOOTSTRAP_SERVERS, GROUP_ID, *_STORAGE_TOPIC, CONNECT_*, REST_PORT), it answers on its REST port
#   (the time from `podman run` to GET /health answering 200 is measured), and the engine's
#   healthcheck passes;
#   the REST API refuses a caller without credentials; a connector created over REST (the
#   quickstart's JSON, its database password read by the file config provider from a mounted
#   secret, and PostgreSQL requiring that password) publishes every event to Kafka; the secret
#   appears in no log line and no REST response;
#   `podman stop` (SIGTERM) while events are being written: the worker exits 0, a restart
#   publishes whatever was not, and the slot ends confirmed past the last commit, with every event
#   in Kafka;
#   `run` (one connector file, no REST API): the time from `podman run` to /ready answering 200.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/lib.sh"

IMAGE=${PGOUTBOX_IMAGE:-localhost/pgoutbox:dev}
SLIM=docker.io/library/debian:bookworm-slim
RUST=docker.io/library/rust:1.95-bookworm
RUST_VERSION=1.95.0
cmd=${1:-all}
case "$cmd" in all | build | check | bases | compose | standins) ;; *) die "usage: image.sh [build|check|bases|compose|standins]" ;; esac

need=()
for tool in podman buildah mmdebstrap curl; do command -v "$tool" >/dev/null || need+=("$tool"); done
command -v runc >/dev/null || need+=(runc)
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]} (Debian packages)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null \
        || die "could not install ${need[*]}; install them (apt-get install ${need[*]}) and run again"
fi

# podman's default runtime here (crun) fails on this kind of machine: it cannot raise RLIMIT_NOFILE
# and RLIMIT_NPROC to podman's defaults (the sandbox withholds CAP_SYS_RESOURCE), and it refuses the
# hybrid cgroup hierarchy ("cgroups in hybrid mode not supported"). runc, with the limits the
# process already has, runs. Probed once on the first base image; where the default works it is used.
engine_opts=()
probe_engine() {
    local out
    if out=$(podman run --rm --network host "$SLIM" true 2>&1); then return 0; fi
    local nofile
    nofile=$(ulimit -Hn)
    engine_opts=(--runtime runc --ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096)
    if podman run --rm --network host "${engine_opts[@]}" "$SLIM" true >/dev/null 2>&1; then
        log "podman's default runtime cannot run containers here ($out); using: ${engine_opts[*]}"
        return 0
    fi
    die "podman cannot run containers on this machine: $out"
}

# base_image NAME MAKER: pull NAME, or make it with MAKER when no registry answers.
base_image() {
    if podman image exists "$1"; then return 0; fi
    if timeout 60 podman pull -q "$1" >/dev/null 2>&1; then log "pulled $1"; return 0; fi
    log "no registry answers for $1: making it from Debian's packages"
    "$2"
}

# The merged-/usr hook lays out /usr as bookworm's images have it without the usrmerge package, which
# would bring perl (45 MB) into the image.
slim_excludes=(
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias'
    --dpkgopt='path-exclude=/usr/share/lintian/*'
)

# The apt settings Debian's published images carry (debuerreotype's docker-clean and friends): no
# package caches (80 MB after one `apt-get update`), no downloaded packages, no translations.
apt_hook='d="$1/etc/apt/apt.conf.d"
printf "%s\n" "DPkg::Post-Invoke { \"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true\"; };" \
    "APT::Update::Post-Invoke { \"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true\"; };" \
    "Dir::Cache::pkgcache \"\";" "Dir::Cache::srcpkgcache \"\";" >"$d/docker-clean"
printf "%s\n" "Acquire::Languages \"none\";" >"$d/docker-no-languages"
printf "%s\n" "Acquire::GzipIndexes \"true\";" >"$d/docker-gzip-indexes"
printf "%s\n" "Apt::AutoRemove::SuggestsImportant \"false\";" >"$d/docker-autoremove-suggests"
rm -f "$1"/var/cache/apt/*.bin'

# local_image IMAGE MMDEBSTRAP-ARGS... -- IMPORT-CHANGES...: IMAGE made from bookworm (the slim
# variant's packages and apt settings, plus the arguments) and labelled as made here.
local_image() {
    local image=$1 tar args=() changes=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
    shift
    for c in "$@"; do changes+=(--change "$c"); done
    tar=$(mktemp /tmp/pgoutbox-image.XXXXXX.tar)
    mmdebstrap --quiet --variant=minbase "${slim_excludes[@]}" --customize-hook="$apt_hook" "${args[@]}" bookworm "$tar" \
        || { rm -f "$tar"; die "mmdebstrap for $image failed"; }
    podman import --quiet "${changes[@]}" --change 'LABEL org.pgoutbox.base=local' "$tar" "$image" >/dev/null
    rm -f "$tar"
    log "made $image ($(podman image inspect -f '{{.Size}}' "$image") bytes)"
}

make_slim() {
    local_image "$SLIM" -- 'CMD ["bash"]'
}

make_rust() {
    local tar ca_hook=true
    # A machine whose HTTPS goes through an intercepting proxy trusts the proxy's CA locally
    # (/usr/local/share/ca-certificates): the build image needs it too, for rustup here and cargo in
    # the build. It is copied into this build-only image, never into the runtime image.
    if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
        ca_hook='for f in /usr/local/share/ca-certificates/*.crt; do cp "$f" "$1/usr/local/share/ca-certificates/"; done; chroot "$1" update-ca-certificates >/dev/null'
    fi
    tar=$(mktemp /tmp/pgoutbox-rust.XXXXXX.tar)
    mmdebstrap --quiet --variant=minbase "${slim_excludes[@]}" \
        --include=ca-certificates,curl,git,build-essential,perl,make,pkg-config,libcurl4-openssl-dev,libssl-dev,zlib1g-dev \
        --customize-hook="$ca_hook" --customize-hook='chroot "$1" sh -ec "
            curl -sSf --retry 3 -o /tmp/rustup-init https://static.rust-lang.org/rustup/dist/x86_64-unknown-linux-gnu/rustup-init
            chmod 755 /tmp/rustup-init
            RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo /tmp/rustup-init -y -q --no-modify-path \
                --profile minimal --default-toolchain '"$RUST_VERSION"'
            rm /tmp/rustup-init
            chmod -R a+w /usr/local/rustup /usr/local/cargo"' \
        bookworm "$tar" || { rm -f "$tar"; die "mmdebstrap of the Rust build image failed"; }
    podman import --quiet --change 'ENV RUSTUP_HOME=/usr/local/rustup' --change 'ENV CARGO_HOME=/usr/local/cargo' \
        --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' --change 'LABEL org.pgoutbox.base=local' "$tar" "$RUST" >/dev/null
    rm -f "$tar"
    log "made $RUST ($(podman image inspect -f '{{.Size}}' "$RUST") bytes)"
}

build() {
    base_image "$SLIM" make_slim
    probe_engine
    base_image "$RUST" make_rust
    # The crates and the build's target directory are kept between builds, in the cache folder,
    # mounted into the build step only: the image gets the binary, not the cache.
    mkdir -p "$PGOUTBOX_CACHE/image/cargo-registry" "$PGOUTBOX_CACHE/image/target"
    local start commit
    start=$(date +%s)
    commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
    log "building $IMAGE (commit $commit)"
    podman build "${engine_opts[@]}" --format docker --pull=never --network host \
        -v "$PGOUTBOX_CACHE/image/cargo-registry:/usr/local/cargo/registry" \
        -v "$PGOUTBOX_CACHE/image/target:/src/target" \
        --build-arg "PGOUTBOX_COMMIT=$commit" -f "$root/docker/Dockerfile" -t "$IMAGE" "$root" \
        || die "podman build failed (above)"
    log "built $IMAGE in $(( $(date +%s) - start ))s"
}

# --- checks ---
work=""
containers=()
cleanup() {
    local c
    for c in "${containers[@]}"; do podman rm -f -t 0 "$c" >/dev/null 2>&1 || true; done
    if [ -n "$work" ]; then
        kafka_stop "$work/kafka" kill
        pg_stop "$work/pg" immediate
        rm -rf "$work"
    fi
}

fail() { log "FAILED: $*"; for c in "${containers[@]}"; do log "--- podman logs $c (last 40 lines)"; podman logs --tail 40 "$c" >&2 2>&1 || true; done; exit 1; }
ok() { log "ok: $*"; }

psql_pg() { psql -h 127.0.0.1 -p "$pg_port" -U postgres -X -q -v ON_ERROR_STOP=1 "$@"; }
now_ms() { date +%s%3N; }

# wait_http URL SECONDS [CURL ARGS...]: until URL answers 200; prints the milliseconds it took.
wait_http() {
    local url=$1 limit=$2 t0
    shift 2
    t0=$(now_ms)
    while [ $(( $(now_ms) - t0 )) -lt $(( limit * 1000 )) ]; do
        if [ "$(curl -s -o /dev/null -w '%{http_code}' "$@" "$url" 2>/dev/null)" = 200 ]; then
            echo $(( $(now_ms) - t0 )); return 0
        fi
        sleep 0.02
    done
    return 1
}

# events TOPIC: the number of records in TOPIC (the sum of its partitions' end offsets).
events() {
    kafka_java org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$broker" --topic "$1" 2>/dev/null \
        | awk -F: '{ n += $NF } END { print n + 0 }'
}

# write_orders N [ROWS PER TRANSACTION]: N orders, each an order row and its outbox event in one
# transaction (or ROWS of them per transaction).
write_orders() {
    psql_pg -d orderdb -c "DO \$\$ BEGIN FOR i IN 1..$1 LOOP
        INSERT INTO inventory.purchaseorder (customer) VALUES ('c' || i);
        INSERT INTO inventory.outboxevent (id, aggregatetype, aggregateid, type, payload)
        VALUES (gen_random_uuid(), 'order', currval('inventory.purchaseorder_id_seq')::text, 'OrderCreated',
                jsonb_build_object('customer', 'c' || i));
        IF i % ${2:-1} = 0 THEN COMMIT; END IF;
    END LOOP; END \$\$;"
}

# start_checked NAME URL [PODMAN RUN ARGS...]: runs a container of the image, waits until URL answers
# 200 and runs the image's HEALTHCHECK in it; started_ms is the time from `podman run` to that 200.
started_ms=0
start_checked() {
    local name=$1 url=$2 t0
    shift 2
    containers+=("$name")
    podman rm -f -t 0 "$name" >/dev/null 2>&1 || true
    t0=$(now_ms)
    podman run -d --name "$name" "${engine_opts[@]}" --network host "$@" >/dev/null || fail "the container $name did not start"
    wait_http "$url" 60 >/dev/null || fail "$name: $url did not answer 200"
    started_ms=$(( $(now_ms) - t0 ))
    podman healthcheck run "$name" >/dev/null || fail "the image's HEALTHCHECK failed in $name"
}

check() {
    podman image exists "$IMAGE" || die "$IMAGE is not built: run scripts/image.sh build"
    # PostgreSQL 15 and Apache Kafka, as the test suite installs them.
    if [ ! -d "$KAFKA_LIBS" ] || ! pg_bindir >/dev/null 2>&1; then bash "$here/install.sh"; fi
    [ ${#engine_opts[@]} -gt 0 ] || probe_engine
    trap cleanup EXIT
    work=$(mktemp -d /tmp/pgoutbox-image.XXXXXX)
    chmod 755 "$work"

    # The image's facts.
    local user size gz health
    user=$(podman image inspect -f '{{.Config.User}}' "$IMAGE")
    [ "$user" = 10001:10001 ] || fail "the image's user is '$user', not 10001:10001"
    [ "$(podman run --rm "${engine_opts[@]}" --network host --entrypoint /bin/sh "$IMAGE" -c 'echo $EUID')" = 10001 ] \
        || fail "a container of the image does not run as uid 10001"
    ok "runs as uid 10001"
    health=$(podman image inspect -f '{{json .Config.Healthcheck}}' "$IMAGE")
    [[ $health == *pgoutbox-healthcheck* ]] || fail "no HEALTHCHECK in the image (podman build --format docker keeps it): $health"
    size=$(podman image inspect -f '{{.Size}}' "$IMAGE")
    gz=$(podman save -q "$IMAGE" 2>/dev/null | gzip -6 | wc -c)
    log "image size: $(( size / 1000000 )) MB uncompressed, $(( gz / 1000000 )) MB gzipped (podman save | gzip -6)"

    # PostgreSQL 15 with the quickstart's schema and user; the user's password is required (scram),
    # so a connector that did not read the mounted secret cannot connect.
    pg_port=$(free_port)
    pg_start "$work/pg" "$pg_port"
    psql_pg -c "CREATE ROLE postgresuser LOGIN REPLICATION PASSWORD 'postgrespw'" -c "CREATE DATABASE orderdb OWNER postgresuser"
    psql_pg -d orderdb -c "SET ROLE postgresuser" -f "$root/docker/init.sql" >/dev/null
    sed -i '1i host all postgresuser 127.0.0.1/32 scram-sha-256\nhost replication postgresuser 127.0.0.1/32 scram-sha-256' \
        "$work/pg/data/pg_hba.conf"
    psql_pg -c "SELECT pg_reload_conf()" >/dev/null
    PGPASSWORD=wrong psql -h 127.0.0.1 -p "$pg_port" -U postgresuser -d orderdb -X -c 'SELECT 1' >/dev/null 2>&1 \
        && fail "PostgreSQL accepted a wrong password: the secret check would prove nothing"
    kafka_start "$work/kafka" 1
    broker=$(sed -n 's/^PLAINTEXT=//p' "$work/kafka/env")

    # The Connect worker, the image's default command, configured as Debezium's image is.
    local rest_port t_rest c=pgoutbox-image-worker
    rest_port=$(free_port)
    # The brokers by name: the image resolves names without a distribution's NSS files.
    local worker_env=(-e "BOOTSTRAP_SERVERS=${broker/127.0.0.1/localhost}" -e GROUP_ID=image-check -e CONFIG_STORAGE_TOPIC=image_configs
        -e OFFSET_STORAGE_TOPIC=image_offsets -e STATUS_STORAGE_TOPIC=image_statuses
        -e CONNECT_CONFIG_STORAGE_REPLICATION_FACTOR=1 -e CONNECT_OFFSET_STORAGE_REPLICATION_FACTOR=1
        -e CONNECT_STATUS_STORAGE_REPLICATION_FACTOR=1 -e "REST_PORT=$rest_port"
        -v "$root/docker/db.properties:/run/secrets/db.properties:ro,z"
        -v "$root/docker/connect-users.properties:/run/secrets/connect-users.properties:ro,z")
    start_checked "$c" "http://127.0.0.1:$rest_port/health" "${worker_env[@]}" "$IMAGE"
    t_rest=$started_ms
    log "worker: GET /health answered 200 ${t_rest} ms after podman run"
    ok "HEALTHCHECK passes"
    local t0
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$rest_port/connectors")" = 401 ] \
        || fail "GET /connectors without credentials was not refused with 401"
    ok "the REST API refuses a caller without credentials"

    local cfg
    cfg=$(python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["database.hostname"] = "127.0.0.1"; c["database.port"] = sys.argv[2]
print(json.dumps(c))' "$root/docker/outbox-connector.json" "$pg_port")
    curl -fsS -o /dev/null -u admin:admin-secret -X PUT -H 'Content-Type: application/json' --data "$cfg" \
        "http://127.0.0.1:$rest_port/connectors/outbox-connector/config" || fail "creating the connector over REST failed"
    local state="" i
    for i in $(seq 1 300); do
        state=$(curl -s -u admin:admin-secret "http://127.0.0.1:$rest_port/connectors/outbox-connector/status" \
            | python3 -c 'import json, sys; s = json.load(sys.stdin); print(s["connector"]["state"], *[t["state"] for t in s.get("tasks", [])])' 2>/dev/null || true)
        [ "$state" = "RUNNING RUNNING" ] && break
        sleep 0.1
    done
    [ "$state" = "RUNNING RUNNING" ] || fail "the connector is not running (status: $state)"
    ok "a connector created over REST runs (its password read from the mounted secret)"

    write_orders 1000
    local n=0
    for i in $(seq 1 60); do n=$(events order.events); [ "$n" -ge 1000 ] && break; sleep 1; done
    [ "$n" = 1000 ] || fail "order.events holds $n records for 1000 events"
    ok "1000 orders written, 1000 events in order.events"

    # SIGTERM from the engine while events are being written.
    write_orders 100000 10 &
    local writer=$!
    sleep 1
    local t_stop exit_code
    t0=$(now_ms)
    podman stop -t 60 "$c" >/dev/null
    t_stop=$(( $(now_ms) - t0 ))
    exit_code=$(podman inspect -f '{{.State.ExitCode}}' "$c")
    wait "$writer"
    [ "$exit_code" = 0 ] || fail "the worker exited $exit_code after SIGTERM (podman stop)"
    ok "SIGTERM during writes: the worker drained and exited 0 in ${t_stop} ms, with $(events order.events) of 101000 events published"
    local end_lsn
    end_lsn=$(psql_pg -d orderdb -tA -c "SELECT pg_current_wal_lsn()")
    podman start "$c" >/dev/null
    for i in $(seq 1 120); do n=$(events order.events); [ "$n" -ge 101000 ] && break; sleep 1; done
    [ "$n" -ge 101000 ] || fail "after the restart order.events holds $n records for 101000 events"
    local distinct confirmed
    distinct=$(kafka_java org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$broker" \
        --topic order.events --from-beginning --timeout-ms 15000 --property print.value=false \
        --property print.headers=true 2>/dev/null | grep -o 'id:[0-9a-f-]*' | sort -u | wc -l)
    [ "$distinct" = 101000 ] || fail "$distinct distinct event ids in order.events for 101000 events"
    for i in $(seq 1 60); do
        confirmed=$(psql_pg -d orderdb -tA -c "SELECT confirmed_flush_lsn >= '$end_lsn' FROM pg_replication_slots WHERE slot_name = 'outbox_connect_slot'")
        [ "$confirmed" = t ] && break
        sleep 1
    done
    [ "$confirmed" = t ] || fail "the slot is not confirmed past the last commit ($end_lsn) after the restart"
    # A stop inside a transaction reads on to its commit: nothing is published twice.
    [ "$n" = 101000 ] || fail "after the restart order.events holds $n records for 101000 events: $(( n - 101000 )) published twice"
    ok "after the restart: all 101000 events in order.events, none twice, the slot confirmed past the last commit"
    podman logs "$c" 2>&1 | grep -q postgrespw && fail "the database password appears in the worker's log"
    curl -s -u admin:admin-secret "http://127.0.0.1:$rest_port/connectors/outbox-connector" | grep -q postgrespw \
        && fail "the database password appears in a REST response"
    ok "the password is in no log line and no REST response"
    podman stop -t 30 "$c" >/dev/null

    # `run`: the relay from one connector file (the quickstart's, mounted as compose.yaml mounts it),
    # the addresses set through the environment (PGOUTBOX_<KEY>).
    local metrics_port t_ready r=pgoutbox-image-run
    metrics_port=$(free_port)
    start_checked "$r" "http://127.0.0.1:$metrics_port/ready" -e "PGOUTBOX_BOOTSTRAP_SERVERS=$broker" \
        -e PGOUTBOX_DATABASE_HOSTNAME=127.0.0.1 -e "PGOUTBOX_DATABASE_PORT=$pg_port" \
        -e "PGOUTBOX_METRICS_ADDRESS=127.0.0.1:$metrics_port" \
        -v "$root/docker/connector.properties:/etc/pgoutbox/connector.properties:ro,z" \
        -v "$root/docker/db.properties:/run/secrets/db.properties:ro,z" "$IMAGE" run
    t_ready=$started_ms
    log "run: /ready answered 200 ${t_ready} ms after podman run"
    ok "HEALTHCHECK passes for run"
    t0=$(now_ms)
    podman stop -t 30 "$r" >/dev/null
    [ "$(podman inspect -f '{{.State.ExitCode}}' "$r")" = 0 ] || fail "run exited $(podman inspect -f '{{.State.ExitCode}}' "$r") after SIGTERM"
    ok "run stopped by SIGTERM in $(( $(now_ms) - t0 )) ms, exit 0"
    # A restart, as after a deploy or a crash: the slot and the topic exist.
    local t_again
    t0=$(now_ms)
    podman start "$r" >/dev/null
    wait_http "http://127.0.0.1:$metrics_port/ready" 60 >/dev/null || fail "run (restarted): /ready did not answer 200"
    t_again=$(( $(now_ms) - t0 ))
    log "run, restarted: /ready answered 200 ${t_again} ms after podman start"
    podman stop -t 30 "$r" >/dev/null
    log "summary: image $(( size / 1000000 )) MB ($(( gz / 1000000 )) MB gzipped); worker REST up in ${t_rest} ms; run ready in ${t_ready} ms (first start), ${t_again} ms (restart)"
}

# --- The compose quickstart ---
# docker/compose.yaml run as `docker compose up` would run it: its default services (PostgreSQL,
# Kafka, the pgoutbox Connect worker, `register` creating the connector over REST with curl, and the
# console consumer) in one podman pod (scripts/quickstart/compose-pod.py: the pod shares the host's
# network, every service name resolves to 127.0.0.1, so the host ports 5432, 9092, 9093 and 8083
# must be free). Then an order is placed as the compose file's header says, and the consumer must
# print its event. Figures: the time from `up` to the connector RUNNING, and from the order's commit
# to the consumer printing it.
#
# The third-party images it names (postgres, apache/kafka, curlimages/curl) are pulled where a
# registry answers. Where none does, stand-ins are made from Debian's packages and what the test
# suite installs, tagged with the compose file's names and labelled org.pgoutbox.base=local (they
# are not the published images): PostgreSQL 17 from the npm registry (scripts/pg-versions.sh; psql
# and pg_isready are Debian's 15 clients) with an entrypoint doing what docker-entrypoint.sh does for this file (scripts/quickstart/); Kafka's
# Maven Central jars (the suite's release, $KAFKA_VERSION, whatever tag the file names) with
# Debian's Java 17 and an entrypoint mapping KAFKA_* variables to properties as the official image
# does; curl from Debian.
PG_STANDIN=docker.io/library/postgres:17
KAFKA_STANDIN=docker.io/apache/kafka:4.1.0
CURL_STANDIN=docker.io/curlimages/curl:8.11.1
POD=pgoutbox-quickstart


make_pg_standin() {
    local bindir pgroot
    bindir=$(bash "$here/pg-versions.sh" install 17) || die "installing PostgreSQL 17 for its stand-in image failed"
    pgroot=$(dirname "$bindir")
    # The npm build carries the server only: psql and pg_isready are Debian's PostgreSQL 15 clients.
    local_image "$PG_STANDIN" --include=postgresql-client-15 \
        --customize-hook='mkdir -p "$1/usr/lib/postgresql/17"' \
        --customize-hook="copy-in $pgroot/bin $pgroot/lib $pgroot/share /usr/lib/postgresql/17" \
        --customize-hook="copy-in $here/quickstart/postgres-entrypoint.sh /usr/local/bin" \
        --customize-hook='chroot "$1" sh -ec "groupadd -r -g 999 postgres; useradd -r -g postgres -u 999 -d /var/lib/postgresql -s /bin/bash postgres; mkdir -p /var/lib/postgresql /docker-entrypoint-initdb.d; chown postgres:postgres /var/lib/postgresql; mv /usr/local/bin/postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh"' \
        -- 'ENV PATH=/usr/lib/postgresql/17/bin:/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        'ENV PGDATA=/var/lib/postgresql/data' 'ENV LANG=C.UTF-8' 'ENTRYPOINT ["docker-entrypoint.sh"]' 'CMD ["postgres"]' \
        'EXPOSE 5432' 'STOPSIGNAL SIGINT'
}

make_kafka_standin() {
    [ -d "$KAFKA_LIBS" ] || die "Apache Kafka $KAFKA_VERSION is not in $KAFKA_LIBS; run scripts/install.sh"
    # Java's postinst registers its manual pages as alternatives: their folder must exist, although
    # the manuals themselves are left out (as in Debian's slim images).
    local_image "$KAFKA_STANDIN" --include=openjdk-17-jre-headless \
        --essential-hook='mkdir -p "$1/usr/share/man/man1"' \
        --customize-hook='mkdir -p "$1/opt/kafka" "$1/etc/kafka/docker"' \
        --customize-hook="copy-in $KAFKA_LIBS /opt/kafka" \
        --customize-hook="copy-in $here/quickstart/kafka-entrypoint.sh /etc/kafka/docker" \
        --customize-hook="bash $here/quickstart/kafka-bin.sh \"\$1\"" \
        --customize-hook='chroot "$1" sh -ec "mkdir -p /var/lib/kafka/data; mv /etc/kafka/docker/kafka-entrypoint.sh /etc/kafka/docker/run"' \
        -- 'ENTRYPOINT ["/etc/kafka/docker/run"]' 'EXPOSE 9092' "LABEL org.pgoutbox.kafka.version=$KAFKA_VERSION"
}

make_curl_standin() {
    local_image "$CURL_STANDIN" --include=curl,ca-certificates \
        -- 'ENTRYPOINT ["curl"]' 'CMD ["--help"]'
}

standins() {
    base_image "$SLIM" make_slim
    probe_engine
    base_image "$PG_STANDIN" make_pg_standin
    base_image "$KAFKA_STANDIN" make_kafka_standin
    base_image "$CURL_STANDIN" make_curl_standin
}

# order_arrives WHAT: places an order as the compose file's header says and waits for the consumer to
# print its event (key: the order id); t_event is the time from the commit to the consumer's line.
t_event=0
order_arrives() {
    local order t0
    t0=$(now_ms)
    order=$(podman exec "$POD-postgres" psql -U postgresuser orderdb -X -q -t -A -c \
        "BEGIN; INSERT INTO inventory.purchaseorder (customer) VALUES ('alice');
         INSERT INTO inventory.outboxevent (id, aggregatetype, aggregateid, type, payload)
         VALUES (gen_random_uuid(), 'order', currval('inventory.purchaseorder_id_seq')::text,
                 'OrderCreated', '{\"customer\": \"alice\"}'); COMMIT; SELECT currval('inventory.purchaseorder_id_seq');" | tail -1)
    for _ in $(seq 1 300); do
        if podman logs "$POD-consumer" 2>/dev/null | grep -q "alice"; then break; fi
        sleep 0.1
    done
    podman logs "$POD-consumer" 2>/dev/null | grep -q "alice" || { podman logs --tail 40 "$POD-$1" >&2; die "$1: the consumer printed no event for order $order"; }
    t_event=$(( $(now_ms) - t0 ))
    ok "$1: order $order placed; the consumer printed its event ${t_event} ms after the commit:"
    podman logs "$POD-consumer" 2>/dev/null | grep "alice" | tail -1 >&2
    podman logs "$POD-consumer" 2>/dev/null | grep "alice" | tail -1 | grep -q "	$order	" \
        || die "$1: the event's key is not the order id $order"
}

quickstart() {
    local f=$root/docker/compose.yaml image opts=() t0 t_up t_run status
    for image in postgres:17 apache/kafka:4.1.0 curlimages/curl:8.11.1; do
        grep -q "image: $image\$" "$f" || die "docker/compose.yaml no longer names $image: update the stand-ins in scripts/image.sh"
    done
    standins
    podman image exists "$IMAGE" || build
    for o in "${engine_opts[@]}"; do opts+=("--engine-opt=$o"); done
    trap 'python3 "$here/quickstart/compose-pod.py" down "$POD" >/dev/null 2>&1 || true' EXIT

    # `docker compose up`: the Connect worker, the connector created over REST by `register`.
    t0=$(now_ms)
    python3 "$here/quickstart/compose-pod.py" up "$f" "$POD" --build-image "$IMAGE" "${opts[@]}" \
        || die "the quickstart did not come up"
    podman wait "$POD-register" >/dev/null
    [ "$(podman inspect -f '{{.State.ExitCode}}' "$POD-register")" = 0 ] \
        || { podman logs "$POD-register" >&2; die "register (curl PUT of the connector) failed"; }
    status=""
    for _ in $(seq 1 120); do
        status=$(curl -s -u admin:admin-secret http://127.0.0.1:8083/connectors/outbox-connector/status || true)
        case "$status" in *'"tasks":[{"id":0,"state":"RUNNING"'*) break ;; esac
        sleep 0.5
    done
    case "$status" in *'"tasks":[{"id":0,"state":"RUNNING"'*) ;; *) podman logs --tail 40 "$POD-connect" >&2; die "the connector is not RUNNING: $status" ;; esac
    t_up=$(( $(now_ms) - t0 ))
    ok "compose up: postgres, kafka, connect, register and consumer ran; the connector was RUNNING ${t_up} ms after up"
    order_arrives connect
    local t_connect_event=$t_event
    python3 "$here/quickstart/compose-pod.py" down "$POD"

    # `docker compose --profile run up postgres kafka pgoutbox consumer`: the relay without Connect.
    t0=$(now_ms)
    python3 "$here/quickstart/compose-pod.py" up "$f" "$POD" --build-image "$IMAGE" "${opts[@]}" \
        --profile run --service postgres --service kafka --service pgoutbox --service consumer || die "the quickstart's run profile did not come up"
    wait_http http://127.0.0.1:8080/ready 120 >/dev/null || { podman logs --tail 40 "$POD-pgoutbox" >&2; die "pgoutbox (run): /ready did not answer 200"; }
    t_run=$(( $(now_ms) - t0 ))
    ok "compose --profile run up: postgres, kafka, pgoutbox and consumer ran; pgoutbox was ready ${t_run} ms after up"
    order_arrives pgoutbox
    python3 "$here/quickstart/compose-pod.py" down "$POD"
    log "summary: quickstart up (connector RUNNING) in ${t_up} ms, an order's event at the consumer ${t_connect_event} ms after its commit; run profile ready in ${t_run} ms, the event ${t_event} ms after its commit"
}

case "$cmd" in
    compose) quickstart ;;
    standins) standins ;;
    build) build ;;
    bases) base_image "$SLIM" make_slim; probe_engine; base_image "$RUST" make_rust ;;
    check) base_image "$SLIM" make_slim; check ;;
    all) build; check ;;
esac
