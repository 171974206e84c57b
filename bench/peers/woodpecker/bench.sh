#!/usr/bin/env bash
# bench.sh --json FILE [--system NAME]... [--duration D] [--warmup D] [--FLAG VALUE ...] [WORKLOAD...]
#
# Runs Woodpecker v0.1.35 through the loadgen workloads (all of them when
# none is named) as three systems (all unless --system names some):
#
#   woodpecker          embedded, local storage, in a fresh directory under
#                       $TERN_BENCH_DIR (which must be on the disk under test)
#   woodpecker-minio    embedded, MinIO storage, a fresh MinIO from
#                       scripts/minio-server on a free 127.0.0.1 port for
#                       every run
#   woodpecker-service  service (quorum) mode: 3 LogStore server processes
#                       on the driver's etcd and a fresh MinIO, 3 replicas
#                       acked at 2 (the quorum-1k and quorum-put workloads
#                       are its like-for-like with Tern's quorum logs)
#
# The embedded systems run in two variants: "durable" (Woodpecker's shipped
# settings, which already acknowledge only after fsync on local storage, and
# after PutObject on MinIO) and "tuned-1ms" (the sync tick cut to 1 ms);
# woodpecker-service in "durable" only (its LogStores' shipped tick is
# already 1 ms). Woodpecker's etcd runs inside the driver.
#
# Woodpecker's LogStores listen on 0.0.0.0 and cannot be told otherwise, so
# every woodpecker-service run happens in a network namespace of its own
# with only loopback up (ip netns add; the driver, the MinIO and the
# LogStores all run in it), which is deleted, and every process in it
# stopped by PID, when the run ends. That needs root (CAP_SYS_ADMIN).
#
# Other --FLAG VALUE pairs (such as --total-bytes for catchup-1g or --count
# for pubsub-*) go to the driver for every workload. Woodpecker's own log of
# each run is kept in ${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/woodpecker/logs.
# Run install.sh first.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/woodpecker
bin=$cache/bin
all_workloads=(sync-1k conc-4k conc-64k async-100b catchup-1g e2e-1k pubsub-5m pubsub-1m pubsub-64k pubsub-1k quorum-1k quorum-put)
all_systems=(woodpecker woodpecker-minio woodpecker-service)
all_variants=(durable tuned-1ms)
# A run that takes longer than this is stopped and reported as stalled.
run_limit=30m

die() { echo "woodpecker/bench.sh: $*" >&2; exit 1; }

json="" driver_args=() workloads=() systems=() variants=()
while (($#)); do
	case $1 in
	--json) (($# >= 2)) || die "--json needs a file"; json=$2; shift 2 ;;
	--system) (($# >= 2)) || die "--system needs a name"; systems+=("$2"); shift 2 ;;
	--variant) (($# >= 2)) || die "--variant needs a value"; variants+=("$2"); shift 2 ;;
	--*) (($# >= 2)) || die "$1 needs a value"; driver_args+=("$1" "$2"); shift 2 ;;
	*) workloads+=("$1"); shift ;;
	esac
done
[[ -n $json ]] || die "usage: bench.sh --json FILE [--system woodpecker|woodpecker-minio|woodpecker-service] [--variant durable|tuned-1ms]... [--duration D] [--warmup D] [WORKLOAD...]"
((${#variants[@]})) || variants=("${all_variants[@]}")
for v in "${variants[@]}"; do
	[[ " ${all_variants[*]} " == *" $v "* ]] || die "unknown variant $v (want one of: ${all_variants[*]})"
done
((${#workloads[@]})) || workloads=("${all_workloads[@]}")
((${#systems[@]})) || systems=("${all_systems[@]}")
for w in "${workloads[@]}"; do
	[[ " ${all_workloads[*]} " == *" $w "* ]] || die "unknown workload $w (want one of: ${all_workloads[*]})"
done
for s in "${systems[@]}"; do
	[[ " ${all_systems[*]} " == *" $s "* ]] || die "unknown system $s (want one of: ${all_systems[*]})"
	[[ -x $bin/$s-driver ]] || die "$bin/$s-driver is missing: run bench/peers/woodpecker/install.sh first"
done
if [[ " ${systems[*]} " == *" woodpecker-service "* ]]; then
	[[ -x $bin/woodpecker-logstore ]] || die "$bin/woodpecker-logstore is missing: run bench/peers/woodpecker/install.sh first"
	command -v ip >/dev/null || die "ip (iproute2) is missing, which woodpecker-service needs for its network namespace: apt-get install iproute2"
fi
[[ -f $cache/woodpecker.yaml ]] || die "$cache/woodpecker.yaml is missing: run bench/peers/woodpecker/install.sh first"
json=$(realpath -m "$json")
mkdir -p "$cache/logs"

data=${TERN_BENCH_DIR:-/var/tmp/tern-bench}
mkdir -p "$data"
if [[ $(stat -f -c %T "$data") == tmpfs ]]; then
	die "$data is a tmpfs, where fsync costs nothing: set TERN_BENCH_DIR to a directory on the disk under test"
fi

# The MinIO, network namespace and directory of the run under way, for
# cleanup on any exit.
minio_pid="" work="" netns=""
# stop_pid PID NAME: SIGTERM, then SIGKILL if PID is still there after 40 s.
stop_pid() {
	kill -TERM "$1" 2>/dev/null || return 0
	for _ in $(seq 400); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	echo "woodpecker/bench.sh: $2 $1 did not stop in 40s; killing it" >&2
	kill -KILL "$1" 2>/dev/null || true
}
stop_run() {
	# The LogStores the driver started (it stops them itself, unless it died).
	if [[ -n $work && -f $work/driver/pids ]]; then
		while read -r pid; do
			# Only if the PID is still a LogStore, not a number reused since.
			if grep -qa woodpecker-logstore "/proc/$pid/cmdline" 2>/dev/null; then
				stop_pid "$pid" "woodpecker LogStore"
			fi
		done <"$work/driver/pids"
	fi
	if [[ -n $minio_pid ]]; then
		kill -TERM "$minio_pid" 2>/dev/null || true
		for _ in $(seq 100); do
			kill -0 "$minio_pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$minio_pid" 2>/dev/null; then
			echo "woodpecker/bench.sh: MinIO $minio_pid did not stop in 10s; killing it" >&2
			kill -KILL "$minio_pid" 2>/dev/null || true
		fi
		minio_pid=""
	fi
	if [[ -n $netns ]]; then
		ip netns del "$netns" 2>/dev/null || echo "woodpecker/bench.sh: could not delete network namespace $netns" >&2
		netns=""
	fi
	if [[ -n $work ]]; then
		rm -rf "$work"
		work=""
	fi
}
trap stop_run EXIT
trap 'stop_run; exit 130' INT TERM

failed=0
for w in "${workloads[@]}"; do
	for s in "${systems[@]}"; do
		if [[ $w == quorum-* && $s != woodpecker-service ]]; then
			echo "woodpecker/bench.sh: skipping $s $w: the quorum workloads are for woodpecker-service" >&2
			continue
		fi
		for v in "${variants[@]}"; do
			if [[ $s == woodpecker-service && $v != durable ]]; then
				echo "woodpecker/bench.sh: skipping $s $v $w: woodpecker-service runs its shipped 1 ms sync tick only" >&2
				continue
			fi
			work=$(mktemp -d "$data/woodpecker-XXXXXX")
			mkdir "$work/driver"
			args=(--workload "$w" --variant "$v" --dir "$work/driver" --json "$json")
			in_ns=()
			if [[ $s == woodpecker-service ]]; then
				netns=tern-wp-$$
				ip netns add "$netns" || die "could not create network namespace $netns (woodpecker-service needs root: its LogStores bind 0.0.0.0)"
				ip netns exec "$netns" ip link set lo up
				in_ns=(ip netns exec "$netns")
			fi
			if [[ $s != woodpecker ]]; then
				line=$("${in_ns[@]}" "$repo/scripts/minio-server" "$work/minio") || die "could not start MinIO (scripts/minio-server; run scripts/install-minio if it is missing)"
				read -r endpoint minio_pid access secret <<<"$line"
				export AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret
				# MinIO's CPU is not counted: --pid would drop the embedded
				# Woodpecker's, which does the work of the log.
				args+=(--addr "$endpoint" --storage-dir "$work/minio")
				echo "$s $v $w: MinIO $minio_pid on $endpoint${netns:+ in network namespace $netns}" >&2
			else
				args+=(--storage-dir "$work/driver/wp")
				echo "$s $v $w: data in $work/driver" >&2
			fi
			if ! timeout --kill-after=30s "$run_limit" "${in_ns[@]}" "$bin/$s-driver" "${args[@]}" "${driver_args[@]}"; then
				echo "woodpecker/bench.sh: $s $v $w failed or stalled past $run_limit; no result written. Woodpecker's log tail:" >&2
				tail -n 20 "$work/driver/woodpecker.log" >&2 || true
				failed=1
			fi
			cp "$work/driver/woodpecker.log" "$cache/logs/$s-$v-$w.log" 2>/dev/null || true
			for f in "$work"/driver/ls*.log; do
				if [[ -f $f ]]; then cp "$f" "$cache/logs/$s-$v-$w-$(basename "$f")"; fi
			done
			stop_run
		done
	done
done
exit $failed
