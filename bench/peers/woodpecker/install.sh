#!/usr/bin/env bash
# Builds the Woodpecker v0.1.35 benchmark driver (Woodpecker and its etcd run
# embedded in it) into ${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/woodpecker/bin
# as woodpecker-driver, with the second names woodpecker-minio-driver and
# woodpecker-service-driver for the MinIO-backed and service-mode systems,
# and Woodpecker's LogStore server as woodpecker-logstore; copies
# Woodpecker's shipped config/woodpecker.yaml, which the driver starts from,
# next to it; and builds the pinned MinIO (scripts/install-minio) for
# woodpecker-minio and woodpecker-service. Idempotent. Cold, the build takes
# several minutes: Woodpecker pulls in many modules.
set -euo pipefail

WOODPECKER_VERSION=v0.1.35

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/woodpecker
bin=$cache/bin
mkdir -p "$bin"

die() { echo "woodpecker/install.sh: $*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH: install Go 1.26 (the version in the repo's go.mod) first"

# The checksum database has no entry for Woodpecker v0.1.35 or its
# memberlist fork; go.sum pins them.
export GONOSUMDB=github.com/zilliztech,github.com/tinswzy

cd "$here"
go mod download github.com/zilliztech/woodpecker ||
	die "go mod download github.com/zilliztech/woodpecker@$WOODPECKER_VERSION failed (is the Go module proxy reachable?)"
src=$(go list -m -f '{{.Dir}}' github.com/zilliztech/woodpecker)
[[ -f $src/config/woodpecker.yaml ]] || die "no config/woodpecker.yaml in $src"
install -m 644 "$src/config/woodpecker.yaml" "$cache/woodpecker.yaml"

echo "building the driver into $bin/woodpecker-driver (several minutes cold)" >&2
go build -o "$bin/woodpecker-driver" . ||
	die "go build of the driver in $here failed (does bench/loadgen build? try 'go vet ./...' in $here)"
ln -sfn woodpecker-driver "$bin/woodpecker-minio-driver"
ln -sfn woodpecker-driver "$bin/woodpecker-service-driver"
# The LogStore server of woodpecker-service: Woodpecker's own "woodpecker
# server" command, at the version go.mod pins (a tool of this module).
go build -o "$bin/woodpecker-logstore" github.com/zilliztech/woodpecker/cmd ||
	die "go build of Woodpecker's LogStore server (github.com/zilliztech/woodpecker/cmd) failed"
command -v ip >/dev/null || die "ip (iproute2) is missing: woodpecker-service runs in a network namespace; apt-get install iproute2"

"$repo/scripts/install-minio" >/dev/null ||
	die "scripts/install-minio failed: woodpecker-minio needs the pinned MinIO"
echo "woodpecker $WOODPECKER_VERSION driver ready in $bin" >&2
