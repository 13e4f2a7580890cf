#!/usr/bin/env bash
# A real schema registry on loopback: Apicurio Registry 2.4.2.Final (in-memory storage), with its
# Confluent-compatible API (/apis/ccompat/v7) and its own (/apis/registry/v2), for the
# schema-registry converters (issue 36). scripts/install.sh builds it; scripts/test.sh starts one for
# the whole suite (PGOUTBOX_TEST_REGISTRY=its URL) and stops it at the end.
#   registry.sh build            assembles the server from Maven Central into the cache (once)
#   registry.sh start DIR        starts it on a free port; DIR/env gets URL=http://127.0.0.1:PORT
#   registry.sh start DIR --tls  the same over https only, with a CA and a certificate for 127.0.0.1
#                                made for it in DIR/tls (DIR/env gets URL=https://... and CA=the CA's PEM)
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

# A CA and a server certificate for 127.0.0.1 and localhost, in DIR/tls.
registry_tls() {
    local tls=$1/tls
    mkdir -p "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=pgoutbox test registry CA" \
        -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$tls/san.ext"
    openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial -days 2 \
        -extfile "$tls/san.ext" -out "$tls/server.pem" 2>/dev/null
}

registry_start() {
    local dir=$1 tls=${2:-} port scheme=http
    local -a opts=()
    [ -f "$REGISTRY_JAR" ] || die "the registry is not built; run scripts/registry.sh build"
    mkdir -p "$dir"
    port=$(free_port)
    if [ "$tls" = --tls ]; then
        registry_tls "$dir"
        scheme=https
        opts=(-Dquarkus.http.ssl-port="$port" -Dquarkus.http.insecure-requests=disabled
            -Dquarkus.http.port="$(free_port)"
            -Dquarkus.http.ssl.certificate.files="$dir/tls/server.pem"
            -Dquarkus.http.ssl.certificate.key-files="$dir/tls/server.key")
    else
        opts=(-Dquarkus.http.port="$port")
    fi
    (
        exec java -Xms64m -Xmx${REGISTRY_HEAP:-128m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
            -Dquarkus.http.host=127.0.0.1 "${opts[@]}" -jar "$REGISTRY_JAR" >>"$dir/registry.log" 2>&1
    ) &
    echo $! >"$dir/pid"
    if [ "$scheme" = https ]; then
        local t
        for t in $(seq 1 1200); do
            if curl -sf --cacert "$dir/tls/ca.pem" -o /dev/null "https://127.0.0.1:$port/apis/ccompat/v7/subjects"; then
                printf 'URL=https://127.0.0.1:%s\nCA=%s\n' "$port" "$dir/tls/ca.pem" >"$dir/env"
                return 0
            fi
            kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
            sleep 0.1
        done
    elif http_wait "$port" /apis/ccompat/v7/subjects "$dir/pid"; then
        echo "URL=http://127.0.0.1:$port" >"$dir/env"
        return 0
    fi
    tail -40 "$dir/registry.log" >&2
    die "the registry did not start (log in $dir/registry.log)"
}

case "${1:-}" in
    build) registry_build ;;
    start) registry_build; registry_start "$2" "${3:-}" ;;
    stop) pid_stop "$2/pid" term 20 ;;
    *) die "usage: registry.sh build | start DIR [--tls] | stop DIR" ;;
esac
