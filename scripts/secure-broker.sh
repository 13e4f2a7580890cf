#!/usr/bin/env bash
# Secured Kafka-protocol brokers for the Kafka security tests, from real parts: tansu for the
# protocol (it authenticates SASL but does not speak TLS) behind Debian's stunnel4 for TLS.
#
#   secure-broker.sh start DIR   certificates, brokers and tunnels under DIR; prints DIR/env
#   secure-broker.sh stop DIR    stops them and removes DIR
#
# Listeners (every broker advertises its TLS port, so clients come back through the tunnel):
#   SASL_SSL   tansu with --authentication (SCRAM users alice/SCRAM-SHA-512 and bob/SCRAM-SHA-256)
#              behind a tunnel with a certificate for 127.0.0.1 and localhost, from the test CA
#   MTLS       tansu without SASL behind a tunnel that requires a client certificate of the test CA
#   WRONGHOST  tansu without SASL behind a tunnel whose certificate names wrong.example only
# Files: ca.pem (the test CA), other-ca.pem (a CA nobody uses), truststore.p12 (ca.pem, password
# trust-pass), client.p12 (client key and certificate, password client-pass), client.pem (the same
# as PEM, key first), client-key.pem, client-cert.pem.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

ALICE_PASSWORD=alice-Sekr3t
BOB_PASSWORD=bob-Sekr3t

certificates() {
    local d=$1
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
            cat "$1-cert.pem" "$1-key.pem" >"$1.pem"
        }
        leaf server "/CN=127.0.0.1" "IP:127.0.0.1,DNS:localhost"
        leaf wronghost "/CN=wrong.example" "DNS:wrong.example"
        leaf client "/CN=pgoutbox-client" "DNS:pgoutbox-client"
        cat client-key.pem client-cert.pem >client.pem
        openssl pkcs12 -export -in client-cert.pem -inkey client-key.pem -certfile ca.pem \
            -passout pass:client-pass -out client.p12
        # A truststore as Java's keytool writes one, when Java is here; OpenSSL's otherwise.
        if command -v keytool >/dev/null 2>&1; then
            keytool -importcert -noprompt -alias ca -file ca.pem -keystore truststore.p12 \
                -storetype PKCS12 -storepass trust-pass >/dev/null 2>&1
            keytool -importcert -noprompt -alias ca -file ca.pem -keystore truststore.jks \
                -storetype JKS -storepass trust-pass >/dev/null 2>&1 || true
        else
            openssl pkcs12 -export -nokeys -in ca.pem -passout pass:trust-pass -out truststore.p12
        fi
    )
}

wait_port() {
    local i
    for i in $(seq 1 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    die "nothing listens on port $1"
}

# tansu DIR PORT ADVERTISED STORAGE [--authentication]
tansu_start() {
    local dir=$1 port=$2 advertised=$3 engine=$4 bin
    shift 4
    bin=$(broker_bin sqlite) || die "no sqlite-capable tansu in $PGOUTBOX_CACHE; run scripts/install.sh"
    mkdir -p "$dir"
    (cd "$dir" && exec "$bin" broker --listener-url "tcp://127.0.0.1:$port" \
        --advertised-listener-url "tcp://127.0.0.1:$advertised" --storage-engine "$engine" "$@" \
        >>"$dir/broker.log" 2>&1) &
    echo $! >"$dir/broker.pid"
    wait_port "$port"
}

tansu_stop() {
    local pid
    pid=$(cat "$1/broker.pid" 2>/dev/null) || return 0
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
}

start() {
    local d=$1
    local stunnel
    stunnel=$(command -v stunnel4 || command -v stunnel) || die "stunnel4 is missing; run scripts/install.sh"
    rm -rf "$d"
    mkdir -p "$d"
    certificates "$d"
    local sasl_plain sasl_tls mtls_plain mtls_tls wrong_plain wrong_tls
    sasl_plain=$(free_port); sasl_tls=$(free_port)
    mtls_plain=$(free_port); mtls_tls=$(free_port)
    wrong_plain=$(free_port); wrong_tls=$(free_port)

    # Users are created while the broker runs without --authentication, on storage that keeps them.
    tansu_start "$d/sasl" "$sasl_plain" "$sasl_tls" "sqlite://tansu.db"
    local bin
    bin=$(broker_bin sqlite)
    "$bin" user create --broker "tcp://127.0.0.1:$sasl_plain" --mechanism scram512 alice "$ALICE_PASSWORD" >>"$d/sasl/users.log" 2>&1
    "$bin" user create --broker "tcp://127.0.0.1:$sasl_plain" --mechanism scram256 bob "$BOB_PASSWORD" >>"$d/sasl/users.log" 2>&1
    tansu_stop "$d/sasl"
    tansu_start "$d/sasl" "$sasl_plain" "$sasl_tls" "sqlite://tansu.db" --authentication
    sqlite_index "$d/sasl/tansu.db"
    tansu_start "$d/mtls" "$mtls_plain" "$mtls_tls" "memory://tansu/"
    tansu_start "$d/wronghost" "$wrong_plain" "$wrong_tls" "memory://tansu/"

    cat >"$d/stunnel.conf" <<EOF
foreground = yes
pid =
output = $d/stunnel.log
debug = notice

[sasl]
accept = 127.0.0.1:$sasl_tls
connect = 127.0.0.1:$sasl_plain
cert = $d/server.pem

[mtls]
accept = 127.0.0.1:$mtls_tls
connect = 127.0.0.1:$mtls_plain
cert = $d/server.pem
CAfile = $d/ca.pem
verify = 2

[wronghost]
accept = 127.0.0.1:$wrong_tls
connect = 127.0.0.1:$wrong_plain
cert = $d/wronghost.pem
EOF
    "$stunnel" "$d/stunnel.conf" >>"$d/stunnel.log" 2>&1 &
    echo $! >"$d/stunnel.pid"
    wait_port "$sasl_tls"; wait_port "$mtls_tls"; wait_port "$wrong_tls"

    cat >"$d/env" <<EOF
SASL_SSL=127.0.0.1:$sasl_tls
SASL_PLAINTEXT=127.0.0.1:$sasl_plain
MTLS=127.0.0.1:$mtls_tls
WRONGHOST=127.0.0.1:$wrong_tls
ALICE_PASSWORD=$ALICE_PASSWORD
BOB_PASSWORD=$BOB_PASSWORD
DIR=$d
EOF
    cat "$d/env"
}

stop() {
    local d=$1
    [ -d "$d" ] || return 0
    kill "$(cat "$d/stunnel.pid" 2>/dev/null)" 2>/dev/null || true
    for b in sasl mtls wronghost; do tansu_stop "$d/$b"; done
    rm -rf "$d"
}

case "${1:-}" in
    start) start "${2:?DIR}" ;;
    stop) stop "${2:?DIR}" ;;
    *) die "usage: secure-broker.sh start|stop DIR" ;;
esac
