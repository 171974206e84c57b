#!/usr/bin/env bash
# Runs walrus through the loadgen workloads, durable then default, each run
# on a fresh data directory, and appends one JSON line per run to FILE.
#
#	bench.sh --json FILE [--duration D] [--warmup D] [--variant V]... [--DRIVER-FLAG V ...] [WORKLOAD...]
#
# Other --flags (--total-bytes N, --count N, ...) go to the driver as they
# are. Without WORKLOAD it runs every workload walrus supports. conc-4k and
# conc-64k run twice, on one topic and on 64 (spec.logs in the result),
# because walrus serialises the appends of a topic; give --logs to run one.
set -euo pipefail
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/walrus"
bin="$cache/bin/walrus-bench"
usage() { echo "usage: $0 --json FILE [--duration D] [--warmup D] [--variant V]... [--DRIVER-FLAG V ...] [WORKLOAD...]" >&2; exit 2; }

json= flags=() workloads=() variants=() logs_given=
while [ $# -gt 0 ]; do
	case "$1" in
	--json) [ $# -ge 2 ] || usage; json=$2; shift 2 ;;
	--variant) [ $# -ge 2 ] || usage; variants+=("$2"); shift 2 ;;
	--logs=*) logs_given=1; flags+=("$1"); shift ;;
	--logs) [ $# -ge 2 ] || usage; logs_given=1; flags+=("$1" "$2"); shift 2 ;;
	--*=*) flags+=("$1"); shift ;;
	--*) [ $# -ge 2 ] || usage; flags+=("$1" "$2"); shift 2 ;;
	*) workloads+=("$1"); shift ;;
	esac
done
[ -n "$json" ] || usage
[ -x "$bin" ] || { echo "walrus: $bin is missing: run bench/peers/walrus/install.sh first" >&2; exit 1; }
json=$(realpath -m "$json")
[ ${#variants[@]} -gt 0 ] || variants=(durable default)
for v in "${variants[@]}"; do
	case "$v" in durable | default) ;; *) echo "walrus: unknown variant $v (want durable or default)" >&2; exit 2 ;; esac
done
# Data goes on the disk under test, as for every system.
data="${TERN_BENCH_DIR:-/var/tmp/tern-bench}"
[ ${#workloads[@]} -gt 0 ] || workloads=(sync-1k conc-4k conc-64k async-100b catchup-1g e2e-1k pubsub-5m pubsub-1m pubsub-64k pubsub-1k)

status=0
for w in "${workloads[@]}"; do
	case "$w" in
	async-100b)
		echo "walrus: skipping async-100b: walrus has no asynchronous append" >&2
		continue ;;
	e2e-1k)
		echo "walrus: skipping e2e-1k: walrus cannot wait for new entries, so no reader can follow the tail without polling" >&2
		continue ;;
	conc-*) [ -n "$logs_given" ] && spreads=("") || spreads=(1 64) ;;
	*) spreads=("") ;;
	esac
	for v in "${variants[@]}"; do
		for logs in "${spreads[@]}"; do
			mkdir -p "$data"
			dir=$(mktemp -d "$data/walrus.XXXXXX")
			echo "walrus: $w $v${logs:+ on $logs topics} in $dir" >&2
			if ! "$bin" --workload "$w" --variant "$v" --dir "$dir" --json "$json" ${logs:+--logs "$logs"} "${flags[@]}"; then
				echo "walrus: $w $v${logs:+ on $logs topics} FAILED (no result line written)" >&2
				status=1
			fi
			rm -rf "$dir"
		done
	done
done
exit $status
