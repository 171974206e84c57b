#!/usr/bin/env bash
# bench.sh --json FILE [--system NAME]... [--duration D] [--warmup D] [--FLAG VALUE ...] [WORKLOAD...]
#
# Runs embedded Woodpecker v0.1.35 through the loadgen workloads (all of
# them when none is named) as two systems (both unless --system names one):
#
#   woodpecker        local storage, in a fresh directory under $TERN_BENCH_DIR
#                     (which must be on the disk under test)
#   woodpecker-minio  MinIO storage, a fresh MinIO from scripts/minio-server
#                     on a free 127.0.0.1 port for every run
#
# each in two variants: "durable" (Woodpecker's shipped settings, which
# already acknowledge only after fsync on local storage, and after PutObject
# on MinIO) and "tuned-1ms" (the sync tick cut to 1 ms). Woodpecker's etcd
# runs inside the driver. Other --FLAG VALUE pairs (such as --total-bytes for
# catchup-1g or --count for pubsub-*) go to the driver for every workload.
# Woodpecker's own log of each run is kept in
# ${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/woodpecker/logs. Run install.sh
# first.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/woodpecker
bin=$cache/bin
all_workloads=(sync-1k conc-4k conc-64k async-100b catchup-1g e2e-1k pubsub-5m pubsub-1m pubsub-64k pubsub-1k)
all_systems=(woodpecker woodpecker-minio)
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
[[ -n $json ]] || die "usage: bench.sh --json FILE [--system woodpecker|woodpecker-minio] [--variant durable|tuned-1ms]... [--duration D] [--warmup D] [WORKLOAD...]"
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
[[ -f $cache/woodpecker.yaml ]] || die "$cache/woodpecker.yaml is missing: run bench/peers/woodpecker/install.sh first"
json=$(realpath -m "$json")
mkdir -p "$cache/logs"

data=${TERN_BENCH_DIR:-/var/tmp/tern-bench}
mkdir -p "$data"
if [[ $(stat -f -c %T "$data") == tmpfs ]]; then
	die "$data is a tmpfs, where fsync costs nothing: set TERN_BENCH_DIR to a directory on the disk under test"
fi

# The MinIO and directory of the run under way, for cleanup on any exit.
minio_pid="" work=""
stop_run() {
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
		for v in "${variants[@]}"; do
			work=$(mktemp -d "$data/woodpecker-XXXXXX")
			mkdir "$work/driver"
			args=(--workload "$w" --variant "$v" --dir "$work/driver" --json "$json")
			if [[ $s == woodpecker-minio ]]; then
				line=$("$repo/scripts/minio-server" "$work/minio") || die "could not start MinIO (scripts/minio-server; run scripts/install-minio if it is missing)"
				read -r endpoint minio_pid access secret <<<"$line"
				export AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret
				# MinIO's CPU is not counted: --pid would drop the embedded
				# Woodpecker's, which does the work of the log.
				args+=(--addr "$endpoint" --storage-dir "$work/minio")
				echo "$s $v $w: MinIO $minio_pid on $endpoint" >&2
			else
				args+=(--storage-dir "$work/driver/wp")
				echo "$s $v $w: data in $work/driver" >&2
			fi
			if ! timeout --kill-after=30s "$run_limit" "$bin/$s-driver" "${args[@]}" "${driver_args[@]}"; then
				echo "woodpecker/bench.sh: $s $v $w failed or stalled past $run_limit; no result written. Woodpecker's log tail:" >&2
				tail -n 20 "$work/driver/woodpecker.log" >&2 || true
				failed=1
			fi
			cp "$work/driver/woodpecker.log" "$cache/logs/$s-$v-$w.log" 2>/dev/null || true
			stop_run
		done
	done
done
exit $failed
