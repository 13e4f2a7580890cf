#!/usr/bin/env bash
# A real schema registry on loopback: Apicurio Registry 2.4.2.Final (in-memory storage), with its
# Confluent-compatible API (/apis/ccompat/v7) and its own (/apis/registry/v2), for the
# schema-registry converters (issue 36). scripts/install.sh builds it; scripts/test.sh starts one for
# the whole suite (PGOUTBOX_TEST_REGISTRY=its URL) and stops it at the end.
#   registry.sh build            assembles the server from Maven Central into the cache (once)
#   registry.sh start DIR        starts it on a free port; DIR/env gets URL=http://127.0.0.1:PORT
#   registry.sh stop DIR
#
# Only the published io.apicurio:apicurio-registry-app jar and its dependencies are used, packaged
# with the Quarkus Maven plugin (scripts/registry/pom.xml). Newer servers cannot be assembled from
# Maven Central here: 2.5.x, 2.6.x and every 3.x need Apicurio jars the repository does not serve.
# Two stand-ins, both in the pom: everit-json-schema under its Maven Central name, and a 10-line
# producer (src/main/java) for an optional extension whose deployment jar is not served (the admin
# API that edits config at run time answers an empty list). Measured here: first build 83 s (189 MB
# of jars), then 10 s; ready in about 6 s with -Xmx128m; about 210 MB resident.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
REGISTRY_VERSION=$(sed -n 's:.*<apicurio.version>\(.*\)</apicurio.version>.*:\1:p' "$here/registry/pom.xml")
REGISTRY_HOME="$PGOUTBOX_CACHE/apicurio-registry-$REGISTRY_VERSION"
REGISTRY_JAR="$REGISTRY_HOME/apicurio-registry-runner-$REGISTRY_VERSION-runner.jar"

registry_build() {
    [ -f "$REGISTRY_JAR" ] && return 0
    command -v mvn >/dev/null || die "Maven is missing (apt-get install maven)"
    local tmp
    tmp=$(mktemp -d "$PGOUTBOX_CACHE/.registry.XXXXXX")
    cp -r "$here/registry/." "$tmp/"
    log "assembling Apicurio Registry $REGISTRY_VERSION from Maven Central (once; cached in $PGOUTBOX_CACHE)"
    mvn -q -B -f "$tmp/pom.xml" package >"$PGOUTBOX_CACHE/registry-install.log" 2>&1 \
        || { tail -30 "$PGOUTBOX_CACHE/registry-install.log" >&2; rm -rf "$tmp"; die "assembling the registry failed"; }
    [ -f "$tmp/target/$(basename "$REGISTRY_JAR")" ] || { rm -rf "$tmp"; die "Maven gave no $(basename "$REGISTRY_JAR")"; }
    rm -rf "$REGISTRY_HOME"
    mv "$tmp/target" "$REGISTRY_HOME"
    rm -rf "$tmp"
}

registry_start() {
    local dir=$1 port
    [ -f "$REGISTRY_JAR" ] || die "the registry is not built; run scripts/registry.sh build"
    mkdir -p "$dir"
    port=$(free_port)
    (
        exec java -Xms64m -Xmx${REGISTRY_HEAP:-128m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
            -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$port" -jar "$REGISTRY_JAR" >>"$dir/registry.log" 2>&1
    ) &
    echo $! >"$dir/pid"
    if http_wait "$port" /apis/ccompat/v7/subjects "$dir/pid"; then
        echo "URL=http://127.0.0.1:$port" >"$dir/env"
        return 0
    fi
    tail -40 "$dir/registry.log" >&2
    die "the registry did not start (log in $dir/registry.log)"
}

case "${1:-}" in
    build) registry_build ;;
    start) registry_build; registry_start "$2" ;;
    stop) pid_stop "$2/pid" term 20 ;;
    *) die "usage: registry.sh build | start DIR | stop DIR" ;;
esac
