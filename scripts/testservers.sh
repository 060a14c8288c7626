#!/bin/sh
# testservers.sh installs, starts and stops the real servers the backend tests run
# against. The work is done in Go, by internal/testservers/cmd/testservers (its doc
# lists the commands and settings); this wrapper builds it and runs it from here:
#
#   scripts/testservers.sh install [SERVER...]
#   scripts/testservers.sh run -- CMD [ARG...]
#   eval "$(scripts/testservers.sh start)"; scripts/testservers.sh stop
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TENURE_CACHE:-$HOME/.cache/tenure}/bin/testservers
# go build is quick when nothing changed: the build cache has it.
GOFLAGS= CGO_ENABLED=0 go build -C "$root" -o "$bin" ./internal/testservers/cmd/testservers
exec "$bin" "$@"
