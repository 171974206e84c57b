#!/usr/bin/env bash
# Benchmarks Apache Kafka 4.3.1 (one KRaft broker that is its own
# controller) with the loadgen workloads:
#
#	bench.sh --json FILE [--duration D] [--warmup D] [--variant V]...
#	         [--DRIVER-FLAG VALUE]... [WORKLOAD...]
#
# For each variant (durable, default; or those named with --variant) and
# each workload (all of them when none is named) it formats a fresh data
# directory, starts the broker on two free loopback ports, runs the driver
# against it (which appends one JSON line to FILE), stops the broker by PID
# and removes the directory. Other --flags (--total-bytes N, --count N, ...)
# are passed to the driver as they are. Kafka's own logs go to files in the
# data directory; their tail is printed when a run fails.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/kafka
driver=$cache/bin/kafka-driver
all_workloads=(sync-1k conc-4k conc-64k async-100b catchup-1g e2e-1k pubsub-5m pubsub-1m pubsub-64k pubsub-1k)
all_variants=(durable default)

die() { echo "kafka/bench.sh: $*" >&2; exit 1; }
usage() { die "usage: bench.sh --json FILE [--duration D] [--warmup D] [--variant V]... [--DRIVER-FLAG VALUE]... [WORKLOAD...]"; }

json= variants=() workloads=() pass=()
while (($#)); do
	case $1 in
	--json) (($# >= 2)) || usage; json=$2; shift 2 ;;
	--variant) (($# >= 2)) || usage; variants+=("$2"); shift 2 ;;
	--*=*) pass+=("$1"); shift ;;
	--*) (($# >= 2)) || usage; pass+=("$1" "$2"); shift 2 ;;
	*) workloads+=("$1"); shift ;;
	esac
done
[[ -n $json ]] || usage
((${#variants[@]})) || variants=("${all_variants[@]}")
((${#workloads[@]})) || workloads=("${all_workloads[@]}")
for w in "${workloads[@]}"; do
	[[ " ${all_workloads[*]} " == *" $w "* ]] || die "unknown workload $w (want some of: ${all_workloads[*]})"
done
for v in "${variants[@]}"; do
	[[ " ${all_variants[*]} " == *" $v "* ]] || die "unknown variant $v (want durable or default)"
done
[[ -x $driver && -f $cache/libs/.pom.sha256 ]] || die "$driver or the Kafka jars are missing: run bench/peers/kafka/install.sh first"
json=$(realpath -m "$json")

# freeport prints a TCP port that nothing on this machine listens on.
freeport() {
	local p
	for _ in {1..100}; do
		p=$((20000 + RANDOM % 40000))
		if [[ -z $(ss -Htan "sport = :$p") ]]; then
			echo "$p"
			return
		fi
	done
	die "found no free TCP port"
}

# clusterid prints a random Kafka UUID (16 bytes, base64url without
# padding); like Kafka's own, never one that starts with "-", which a
# command line would read as a flag.
clusterid() {
	local id
	while :; do
		id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
		[[ $id == -* ]] || break
	done
	echo "$id"
}

pid= data=
stop_broker() {
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in {1..300}; do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "kafka/bench.sh: broker $pid still running 30s after SIGTERM: killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
	fi
	pid=
}
cleanup() {
	stop_broker
	[[ -z $data ]] || rm -rf "$data"
	data=
}
trap cleanup EXIT
trap 'exit 130' INT TERM

show_logs() {
	local f
	for f in "$data/format.log" "$data/stdout.log" "$data/server.log"; do
		[[ -s $f ]] || continue
		echo "--- last lines of $f:" >&2
		tail -n 20 "$f" >&2
	done
}

# The JVM options of Kafka's own kafka-server-start.sh (heap) and
# kafka-run-class.sh (garbage collector).
jvm=(-Xms1g -Xmx1g -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20
	-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent
	-XX:MaxInlineLevel=15 -Djava.awt.headless=true)

# run starts a broker for one variant and workload, runs the driver against
# it and stops it. It returns non-zero when the broker or the driver failed.
run() {
	local variant=$1 workload=$2 port cport
	mkdir -p "${TERN_BENCH_DIR:-/var/tmp/tern-bench}"
	data=$(mktemp -d "${TERN_BENCH_DIR:-/var/tmp/tern-bench}/kafka-$variant-$workload.XXXXXX")
	port=$(freeport)
	cport=$(freeport)
	while [[ $cport == "$port" ]]; do cport=$(freeport); done
	sed -e "s|@PORT@|$port|g" -e "s|@CONTROLLER_PORT@|$cport|g" -e "s|@LOG_DIR@|$data/kafka-logs|g" \
		"$here/server.properties.in" >"$data/server.properties"
	cat >"$data/log4j2.properties" <<-EOF
		appender.file.type = File
		appender.file.name = file
		appender.file.fileName = $data/server.log
		appender.file.layout.type = PatternLayout
		appender.file.layout.pattern = [%d] %p %m (%c)%n
		rootLogger.level = INFO
		rootLogger.appenderRef.file.ref = file
	EOF
	local log4j=-Dlog4j2.configurationFile=$data/log4j2.properties

	if ! java "$log4j" -cp "$cache/libs/*" kafka.tools.StorageTool format \
		-t "$(clusterid)" -c "$data/server.properties" >"$data/format.log" 2>&1; then
		echo "kafka/bench.sh: $variant $workload: formatting the storage failed" >&2
		show_logs
		return 1
	fi

	java "${jvm[@]}" "$log4j" -cp "$cache/libs/*" kafka.Kafka "$data/server.properties" \
		>"$data/stdout.log" 2>&1 &
	pid=$!
	# The listener accepts connections once the broker is up; the driver
	# retries its first requests while the broker finishes registering.
	local ready=
	for _ in {1..1200}; do
		if ! kill -0 "$pid" 2>/dev/null; then
			break
		fi
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			ready=1
			break
		fi
		sleep 0.1
	done
	if [[ -z $ready ]]; then
		echo "kafka/bench.sh: $variant $workload: the broker did not start listening on 127.0.0.1:$port within 120s" >&2
		show_logs
		return 1
	fi

	local rc=0
	"$driver" --workload "$workload" --variant "$variant" --addr "127.0.0.1:$port" \
		--pid "$pid" --storage-dir "$data/kafka-logs" --json "$json" "${pass[@]}" || rc=$?
	if ((rc)); then
		echo "kafka/bench.sh: $variant $workload: the driver failed (exit $rc)" >&2
		show_logs
	fi
	stop_broker
	rm -rf "$data"
	data=
	return "$rc"
}

failed=()
for variant in "${variants[@]}"; do
	for workload in "${workloads[@]}"; do
		echo "kafka/bench.sh: $variant $workload" >&2
		run "$variant" "$workload" || failed+=("$variant/$workload")
		cleanup
	done
done
if ((${#failed[@]})); then
	die "failed runs: ${failed[*]}"
fi
