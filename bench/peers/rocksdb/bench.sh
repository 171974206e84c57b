#!/usr/bin/env bash
# Runs the RocksDB WAL through the loadgen workloads, durable then default,
# each run on a fresh database, and appends one JSON line per run to FILE.
#
#	bench.sh --json FILE [--duration D] [--warmup D] [--variant V]... [--DRIVER-FLAG V ...] [WORKLOAD...]
#
# Other --flags (--total-bytes N, --count N, ...) go to the driver as they
# are. Without WORKLOAD it runs every workload RocksDB supports.
set -euo pipefail
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/rocksdb"
bin="$cache/bin/rocksdb-bench"
usage() { echo "usage: $0 --json FILE [--duration D] [--warmup D] [--variant V]... [--DRIVER-FLAG V ...] [WORKLOAD...]" >&2; exit 2; }

json= flags=() workloads=() variants=()
while [ $# -gt 0 ]; do
	case "$1" in
	--json) [ $# -ge 2 ] || usage; json=$2; shift 2 ;;
	--variant) [ $# -ge 2 ] || usage; variants+=("$2"); shift 2 ;;
	--*=*) flags+=("$1"); shift ;;
	--*) [ $# -ge 2 ] || usage; flags+=("$1" "$2"); shift 2 ;;
	*) workloads+=("$1"); shift ;;
	esac
done
[ -n "$json" ] || usage
[ -x "$bin" ] || { echo "rocksdb: $bin is missing: run bench/peers/rocksdb/install.sh first" >&2; exit 1; }
json=$(realpath -m "$json")
[ ${#variants[@]} -gt 0 ] || variants=(durable default)
for v in "${variants[@]}"; do
	case "$v" in durable | default) ;; *) echo "rocksdb: unknown variant $v (want durable or default)" >&2; exit 2 ;; esac
done
# Data goes on the disk under test, as for every system.
data="${TERN_BENCH_DIR:-/var/tmp/tern-bench}"
[ ${#workloads[@]} -gt 0 ] || workloads=(sync-1k conc-4k conc-64k async-100b catchup-1g e2e-1k pubsub-5m pubsub-1m pubsub-64k pubsub-1k)

status=0
for w in "${workloads[@]}"; do
	case "$w" in
	async-100b)
		echo "rocksdb: skipping async-100b: RocksDB has no asynchronous write (its concurrency is many synchronous writers, as in conc-4k)" >&2
		continue ;;
	e2e-1k)
		echo "rocksdb: skipping e2e-1k: RocksDB cannot wait for new keys, so no reader can follow the tail" >&2
		continue ;;
	esac
	for v in "${variants[@]}"; do
		mkdir -p "$data"
		dir=$(mktemp -d "$data/rocksdb.XXXXXX")
		echo "rocksdb: $w $v in $dir" >&2
		if ! "$bin" --workload "$w" --variant "$v" --dir "$dir/db" --json "$json" "${flags[@]}"; then
			echo "rocksdb: $w $v FAILED (no result line written)" >&2
			status=1
		fi
		rm -rf "$dir"
	done
done
exit $status
