#!/usr/bin/env bash
# Installs the pinned NATS server and builds the benchmark driver, both into
# ${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/nats/bin. Idempotent: the server
# is fetched only when the binary there is not already v2.15.2.
set -euo pipefail

NATS_SERVER_VERSION=v2.15.2

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/nats
bin=$cache/bin
mkdir -p "$bin"

die() { echo "nats/install.sh: $*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH: install Go 1.26 (the version in the repo's go.mod) first"

if [[ -x $bin/nats-server ]] && "$bin/nats-server" --version 2>/dev/null | grep -q "$NATS_SERVER_VERSION"; then
	echo "nats-server $NATS_SERVER_VERSION already in $bin" >&2
else
	echo "installing nats-server $NATS_SERVER_VERSION into $bin" >&2
	# pkg@version builds with the server's own go.mod and go.sum.
	GOBIN=$bin go install "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION" ||
		die "go install github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION failed (is the Go module proxy reachable?)"
fi

echo "building the driver into $bin/nats-driver" >&2
(cd "$here" && go build -o "$bin/nats-driver" .) ||
	die "go build of the driver in $here failed (does bench/loadgen build? try 'go vet ./...' in $here)"
