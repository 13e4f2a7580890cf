#!/usr/bin/env bash
# The release build of the relay: the one command the container image (docker/Dockerfile), the demo
# and CI (scripts/test.sh) all run, so a green CI run means the image's build step works too.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo build --release --locked -p pgoutbox --bin pgoutbox "$@"
