#!/usr/bin/env bash
# bench/milvus/run.sh [FLAG...]
#
# Builds the Milvus side-by-side harness (milvus-bench), the tern binary and
# Woodpecker's LogStore server, then runs the harness with every system
# (Tern local, object and quorum through its Milvus backend; Woodpecker
# local, MinIO and service mode) on the same machine in one run. FLAGs go to
# milvus-bench (--json FILE, --systems, --workloads, --duration, --runs,
# --total-bytes; see main.go).
#
# Woodpecker's LogStores bind 0.0.0.0 with no option to change it, so the
# whole run happens in a network namespace made for it with only loopback up
# (ip netns add tern-milvus-PID): the MinIO, the harness and what it starts
# (an etcd in process, tern serve nodes, LogStores) all run inside, and the
# namespace is deleted, and every process stopped by PID, when the run ends
# however it ends. It needs root. Data goes under $TERN_BENCH_DIR (default
# /var/tmp/tern-bench, never a tmpfs); builds under
# ${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/milvus.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/milvus/bin
data=${TERN_BENCH_DIR:-/var/tmp/tern-bench}

die() { echo "milvus/run.sh: $*" >&2; exit 1; }

command -v ip >/dev/null || die "ip (iproute2) is missing: apt-get install iproute2"
mkdir -p "$bin" "$data"
[[ $(stat -f -c %T "$data") != tmpfs ]] || die "$data is a tmpfs, where fsync costs nothing: set TERN_BENCH_DIR to a directory on the disk under test"

# The checksum database has no entry for Woodpecker v0.1.35 or its
# memberlist fork; go.sum pins them.
export GONOSUMDB=github.com/zilliztech,github.com/tinswzy
(cd "$here" && go build -o "$bin/milvus-bench" . && go build -o "$bin/woodpecker-logstore" github.com/zilliztech/woodpecker/cmd) ||
	die "go build in $here failed"
(cd "$repo" && go build -o "$bin/tern" ./cmd/tern) || die "go build of cmd/tern failed"
wpconfig=$(cd "$here" && go list -m -f '{{.Dir}}' github.com/zilliztech/woodpecker)/config/woodpecker.yaml
"$repo/scripts/install-minio" >/dev/null || die "scripts/install-minio failed"

work=$(mktemp -d "$data/milvus-XXXXXX")
netns=tern-milvus-$$
minio_pid="" harness_pid="" made_ns=""
stop_pid() {
	kill -TERM "$1" 2>/dev/null || return 0
	for _ in $(seq 400); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	echo "milvus/run.sh: $2 $1 did not stop in 40s; killing it" >&2
	kill -KILL "$1" 2>/dev/null || true
}
cleanup() {
	[[ -z $harness_pid ]] || stop_pid "$harness_pid" "milvus-bench"
	if [[ -f $work/pids ]]; then
		while read -r pid; do
			# Only if the PID is still a server of this run, not a number reused since.
			if grep -qa -e woodpecker-logstore -e "$bin/tern" "/proc/$pid/cmdline" 2>/dev/null; then
				stop_pid "$pid" "server"
			fi
		done <"$work/pids"
	fi
	[[ -z $minio_pid ]] || stop_pid "$minio_pid" "MinIO"
	if [[ -n $made_ns ]]; then
		ip netns del "$netns" || echo "milvus/run.sh: could not delete network namespace $netns" >&2
	fi
	rm -rf "$work" "$work.log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$netns" || die "could not create network namespace $netns (needs root)"
made_ns=1
ip netns exec "$netns" ip link set lo up
line=$(ip netns exec "$netns" "$repo/scripts/minio-server" "$work/minio") || die "could not start MinIO (see $work/minio.log)"
read -r endpoint minio_pid access secret <<<"$line"
echo "milvus/run.sh: MinIO $minio_pid on $endpoint in network namespace $netns; data in $work" >&2
AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret ip netns exec "$netns" "$bin/milvus-bench" \
	--dir "$work" --minio "$endpoint" --tern "$bin/tern" --logstore "$bin/woodpecker-logstore" \
	--wp-config "$wpconfig" --pidfile "$work/pids" "$@" &
harness_pid=$!
status=0
wait "$harness_pid" || status=$?
harness_pid=""
exit "$status"
