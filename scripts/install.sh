#!/usr/bin/env bash
# Installs what pgoutbox's demo, tests and benchmarks need and is missing: PostgreSQL 15 (Debian
# package), the tansu broker built from crates.io, and (unless --no-debezium) Java 17 and the Debezium
# 3.6.3 jars for the differential tests and benchmarks. Slow things are cached in $PGOUTBOX_CACHE and
# checked there first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

with_debezium=1
[ "${1:-}" = "--no-debezium" ] && with_debezium=0
need_apt=()
pg_bindir >/dev/null 2>&1 || need_apt+=(postgresql-15)
command -v psql >/dev/null || need_apt+=(postgresql-client-15)
command -v python3 >/dev/null || need_apt+=(python3 python3-pip)
command -v openssl >/dev/null || need_apt+=(openssl)
if [ "$with_debezium" = 1 ]; then
    command -v javac >/dev/null || need_apt+=(openjdk-17-jdk-headless)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    log "installing ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
pg_bindir >/dev/null || die "PostgreSQL server binaries still not found after install"

if [ -x "$TANSU_BIN" ] && "$TANSU_BIN" --version 2>/dev/null | grep -q "$TANSU_VERSION"; then
    :
else
    log "building the tansu $TANSU_VERSION broker (once; about 15 minutes on 2 cores; cached in $PGOUTBOX_CACHE)"
    CARGO_TARGET_DIR="$PGOUTBOX_CACHE/tansu-build" cargo install tansu --version "$TANSU_VERSION" --locked \
        --no-default-features --features dynostore,libsql --root "$PGOUTBOX_CACHE/tansu-$TANSU_VERSION" \
        >"$PGOUTBOX_CACHE/tansu-install.log" 2>&1 \
        || { tail -30 "$PGOUTBOX_CACHE/tansu-install.log" >&2; die "building tansu failed"; }
    rm -rf "$PGOUTBOX_CACHE/tansu-build"
fi
if [ "$with_debezium" = 1 ]; then
    bash "$here/debezium.sh" install || die "installing the Debezium reference runner failed"
fi
log "PostgreSQL: $("$(pg_bindir)/postgres" --version); broker: $("$TANSU_BIN" --version 2>&1 | head -1)"
