#!/bin/bash
# The entrypoint of scripts/image.sh's stand-in for the apache/kafka image (built where no container
# registry answers): as the official image's, every KAFKA_* variable becomes a server property
# (lower case; `___` is `-`, `__` is `_`, `_` is `.`), the storage is formatted with CLUSTER_ID on the
# first start, and the broker runs in the foreground. The JVM options variables (KAFKA_HEAP_OPTS,
# KAFKA_OPTS, ...) are the JVM's, not properties.
set -euo pipefail
props=/tmp/kafka-server.properties
: >"$props"
while IFS='=' read -r name value; do
    case "$name" in
        KAFKA_HEAP_OPTS | KAFKA_OPTS | KAFKA_JVM_PERFORMANCE_OPTS | KAFKA_LOG4J_OPTS | KAFKA_GC_LOG_OPTS | KAFKA_JMX_OPTS) continue ;;
        KAFKA_*) ;;
        *) continue ;;
    esac
    key=$(printf '%s' "${name#KAFKA_}" | tr '[:upper:]' '[:lower:]' | sed -e 's/___/-/g' -e 's/__/\x01/g' -e 's/_/./g' -e 's/\x01/_/g')
    printf '%s=%s\n' "$key" "$value" >>"$props"
done < <(env)
grep -q '^log.dirs=' "$props" || echo "log.dirs=/var/lib/kafka/data" >>"$props"
/opt/kafka/bin/kafka-storage.sh format --ignore-formatted -t "${CLUSTER_ID:-5L6g3nShT-eMCtK--X86sw}" -c "$props" >/dev/null
exec /opt/kafka/bin/kafka-server-start.sh "$props"
