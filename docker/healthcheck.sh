#!/bin/bash
# The image's HEALTHCHECK, without curl: the Connect worker's GET /health (port REST_PORT, default
# 8083; it needs no credentials), else, for `pgoutbox run`, /health/live on the metrics address
# (PGOUTBOX_METRICS_ADDRESS, default 8080). Plain HTTP on loopback: with an https:// listener, or a
# port set through CONNECT_LISTENERS, give the container a HEALTHCHECK of its own.
probe() { # port path
    exec 3<>"/dev/tcp/127.0.0.1/$1" 2>/dev/null || return 2
    printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$2" >&3
    local status
    read -r -t 4 status <&3 || return 1
    exec 3<&-
    [[ $status == *" 200 "* ]]
}
probe "${REST_PORT:-8083}" /health && exit 0
metrics=${PGOUTBOX_METRICS_ADDRESS:-0.0.0.0:8080}
probe "${metrics##*:}" /health/live || exit 1
