#!/usr/bin/env bash
# Start and stop throwaway PostgreSQL and broker instances (used by the benchmark and fault tests).
#   services.sh pg-start DIR PORT          services.sh pg-stop DIR [fast|immediate]
#   services.sh broker-start DIR PORT [memory|sqlite]    services.sh broker-stop DIR [term|kill]
#   services.sh pg-standby-start PRIMARY_DIR PRIMARY_PORT STANDBY_DIR STANDBY_PORT
#   services.sh kafka-start DIR [NODES]   services.sh kafka-stop DIR [term|kill]   (Apache Kafka, KRaft)
#   services.sh kafka-node-start DIR ID    services.sh kafka-node-stop DIR ID [term|kill]
#   services.sh kafka-tool DIR CLASS ARGS...   (a Kafka tool's main class, e.g. partition reassignment)
#   services.sh connect-start DIR BOOTSTRAP [EXTRA]     services.sh connect-stop DIR   (Kafka Connect + Debezium)
#   services.sh free-port
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
cmd=${1:-}; shift || true
case "$cmd" in
    pg-start) pg_start "$@" ;;
    pg-stop) pg_stop "$@" ;;
    pg-standby-start) pg_standby_start "$@" ;;
    broker-start) broker_start "$@" ;;
    broker-stop) broker_stop "$@" ;;
    kafka-start) kafka_start "$@" ;;
    kafka-stop) kafka_stop "$@" ;;
    kafka-node-start) kafka_node_start "$@"; kafka_node_wait "$@" ;;
    kafka-node-stop) kafka_node_stop "$@" ;;
    kafka-tool) d=$1; shift; KAFKA_TOOL_LOGS=$d kafka_java "$@" ;;
    connect-start) connect_start "$@" ;;
    connect-stop) connect_stop "$@" ;;
    free-port) free_port ;;
    pg-bindir) pg_bindir ;;
    *) die "usage: services.sh pg-start|pg-stop|broker-start|broker-stop|free-port|pg-bindir ..." ;;
esac
