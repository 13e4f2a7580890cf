#!/usr/bin/env bash
# The benchmark in one command, from a clean checkout: installs what is missing (PostgreSQL 15, the
# tansu broker, Debezium's jars unless --skip-debezium is given), builds the release binaries, and runs
# pgoutbox-bench with the arguments given (see `--help`). Results: target/bench/ (or --out).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/lib.sh"

install_args=()
for a in "$@"; do
    [ "$a" = --skip-debezium ] && install_args=(--no-debezium)
done
bash "$here/install.sh" "${install_args[@]}"
log "building pgoutbox and pgoutbox-bench (release)"
(cd "$root" && cargo build --release --locked --workspace --bins --quiet)
cd "$root"
exec target/release/pgoutbox-bench "$@"
