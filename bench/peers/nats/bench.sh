#!/usr/bin/env bash
# bench.sh --json FILE [--duration D] [--warmup D] [--variant V]... [--FLAG VALUE ...] [WORKLOAD...]
#
# Runs NATS JetStream through the loadgen workloads (all of them when none
# is named), each in two variants (or those named by --variant): "durable"
# (sync_interval: always, every message fsynced before its PubAck) and
# "default" (NATS's own default, an fsync every 2 minutes). Every run gets a
# fresh nats-server on free 127.0.0.1 ports with a new store_dir under
# ${TERN_BENCH_DIR:-/var/tmp/tern-bench}, which must be on the disk under
# test. Before each run the server's /jsz?config=true is
# checked for the variant's sync setting. Other --FLAG VALUE pairs (such as
# --total-bytes for catchup-1g or --count for pubsub-*) are passed to the
# driver for every workload named. Run install.sh first.
set -euo pipefail

bin=${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/nats/bin
all_workloads=(sync-1k conc-4k conc-64k async-100b catchup-1g e2e-1k pubsub-5m pubsub-1m pubsub-64k pubsub-1k)
all_variants=(durable default)
# A run that takes longer than this is stopped and reported as stalled.
run_limit=30m

die() { echo "nats/bench.sh: $*" >&2; exit 1; }

json="" driver_args=() workloads=() variants=()
while (($#)); do
	case $1 in
	--json) (($# >= 2)) || die "--json needs a file"; json=$2; shift 2 ;;
	--variant) (($# >= 2)) || die "--variant needs a value"; variants+=("$2"); shift 2 ;;
	--*) (($# >= 2)) || die "$1 needs a value"; driver_args+=("$1" "$2"); shift 2 ;;
	*) workloads+=("$1"); shift ;;
	esac
done
[[ -n $json ]] || die "usage: bench.sh --json FILE [--duration D] [--warmup D] [WORKLOAD...]"
((${#workloads[@]})) || workloads=("${all_workloads[@]}")
((${#variants[@]})) || variants=("${all_variants[@]}")
for v in "${variants[@]}"; do
	[[ " ${all_variants[*]} " == *" $v "* ]] || die "unknown variant $v (want one of: ${all_variants[*]})"
done
for w in "${workloads[@]}"; do
	[[ " ${all_workloads[*]} " == *" $w "* ]] || die "unknown workload $w (want one of: ${all_workloads[*]})"
done
for b in nats-server nats-driver; do
	[[ -x $bin/$b ]] || die "$bin/$b is missing: run bench/peers/nats/install.sh first"
done
json=$(realpath -m "$json")

data=${TERN_BENCH_DIR:-/var/tmp/tern-bench}
mkdir -p "$data"
if [[ $(stat -f -c %T "$data") == tmpfs ]]; then
	die "$data is a tmpfs, where fsync costs nothing: set TERN_BENCH_DIR to a directory on the disk under test"
fi

# The server and directory of the run under way, for cleanup on any exit.
server_pid="" work=""
stop_server() {
	if [[ -n $server_pid ]]; then
		kill -TERM "$server_pid" 2>/dev/null || true
		for _ in $(seq 100); do
			kill -0 "$server_pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$server_pid" 2>/dev/null; then
			echo "nats/bench.sh: nats-server $server_pid did not stop in 10s; killing it" >&2
			kill -KILL "$server_pid" 2>/dev/null || true
		fi
		wait "$server_pid" 2>/dev/null || true
		server_pid=""
	fi
	if [[ -n $work ]]; then
		rm -rf "$work"
		work=""
	fi
}
trap stop_server EXIT
trap 'stop_server; exit 130' INT TERM

# start_server VARIANT: starts nats-server in a fresh $work and sets
# server_pid, client_addr and monitor_url.
start_server() {
	work=$(mktemp -d "$data/nats-XXXXXX")
	mkdir "$work/store" "$work/ports" "$work/driver"
	local sync=""
	[[ $1 == durable ]] && sync="sync_interval: always"
	# max_payload fits pubsub-5m's 5 MB entries (the default is 1 MB).
	# max_buffered_size lifts a stream's ingest queue from 128 MiB to 512 MiB,
	# so that pubsub-5m's 64 entries in flight (320 MB) are queued, not
	# refused with "429 too many requests", in both variants.
	cat >"$work/nats.conf" <<-EOF
		host: 127.0.0.1
		port: -1
		http: "127.0.0.1:-1"
		ports_file_dir: "$work/ports"
		max_payload: 8MB
		jetstream {
			store_dir: "$work/store"
			max_buffered_size: 512MB
			$sync
		}
	EOF
	"$bin/nats-server" -c "$work/nats.conf" >"$work/server.log" 2>&1 &
	server_pid=$!
	local ports=""
	for _ in $(seq 100); do
		ports=$(cat "$work"/ports/*.ports 2>/dev/null || true)
		[[ -n $ports ]] && break
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.1
	done
	if [[ -z $ports ]]; then
		cat "$work/server.log" >&2
		die "nats-server did not start (its log is above)"
	fi
	client_addr=$(grep -o '"nats":\["nats://[^"]*' <<<"$ports" | sed 's|.*nats://||')
	monitor_url=$(grep -o '"monitoring":\["http://[^"]*' <<<"$ports" | sed 's|.*\["||')
	[[ -n $client_addr && -n $monitor_url ]] || die "cannot read the server's ports from $ports"
}

# check_sync VARIANT: fails unless the running server's JetStream sync
# setting is the variant's.
check_sync() {
	local jsz
	jsz=$(curl -fsS "$monitor_url/jsz?config=true") || die "cannot read $monitor_url/jsz?config=true"
	if grep -q '"sync_always": *true' <<<"$jsz"; then
		[[ $1 == durable ]] || die "variant $1: server has sync_always on; the default must not set sync_interval"
	else
		[[ $1 != durable ]] || die "variant durable: $monitor_url/jsz?config=true does not show \"sync_always\": true, so acks would not wait for fsync (it shows: $(grep -o '"sync[^,]*' <<<"$jsz" | tr '\n' ' '))"
	fi
}

failed=0
for w in "${workloads[@]}"; do
	for v in "${variants[@]}"; do
		start_server "$v"
		check_sync "$v"
		echo "nats $v $w: nats-server $server_pid on $client_addr" >&2
		if ! timeout --kill-after=30s "$run_limit" "$bin/nats-driver" --workload "$w" --variant "$v" \
			--addr "$client_addr" --pid "$server_pid" --dir "$work/driver" --storage-dir "$work/store" \
			--json "$json" "${driver_args[@]}"; then
			echo "nats/bench.sh: nats $v $w failed or stalled past $run_limit; no result written. Server log tail:" >&2
			tail -n 20 "$work/server.log" >&2
			failed=1
		fi
		stop_server
	done
done
exit $failed
