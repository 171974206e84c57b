#!/usr/bin/env bash
# Benchmarks Apache Pulsar 4.2.4 standalone with the loadgen workloads:
#
#   bench.sh --json FILE [--duration D] [--warmup D] [--variant V]...
#            [--DRIVER-FLAG VALUE]... [WORKLOAD...]
#
# For each variant (durable, then default; --variant picks) and each
# workload (all presets unless named), it starts a fresh standalone (a new
# data directory, broker, bookie and bookie admin ports free on 127.0.0.1),
# waits until it serves public/default, checks the bookie's journal settings
# through the bookie's admin endpoint, runs the driver against it, and stops
# it by PID. Other --flags (--total-bytes, --count, --producers, ...) go to
# the driver as they are. One JSON line per run is appended to FILE.
#
# Environment: PULSAR_MEM overrides the JVM memory flags (default
# "-Xms1g -Xmx1g -XX:MaxDirectMemorySize=2g"); PULSAR_KEEP_DATA=1 keeps
# each run's data directory (server logs in server.out and pulsar.log);
# TERN_BENCH_DIR (default /var/tmp/tern-bench) is where data directories go.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/pulsar
driver=$cache/bin/pulsar-driver
all_workloads=(sync-1k conc-4k conc-64k async-100b catchup-1g e2e-1k pubsub-5m pubsub-1m pubsub-64k pubsub-1k)

die() { echo "pulsar bench: $*" >&2; exit 1; }

json= variants=() workloads=() driver_args=()
while [ $# -gt 0 ]; do
	case $1 in
	--json) json=${2:?--json needs a file}; shift 2 ;;
	--variant) variants+=("${2:?--variant needs durable or default}"); shift 2 ;;
	--*=*) driver_args+=("$1"); shift ;;
	--*) driver_args+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
	*) workloads+=("$1"); shift ;;
	esac
done
[ -n "$json" ] || die "usage: bench.sh --json FILE [--duration D] [--warmup D] [--variant V]... [WORKLOAD...]"
[ ${#variants[@]} -gt 0 ] || variants=(durable default)
[ ${#workloads[@]} -gt 0 ] || workloads=("${all_workloads[@]}")
for v in "${variants[@]}"; do
	case $v in durable | default) ;; *) die "unknown variant $v (durable or default)" ;; esac
done
[ -x "$driver" ] && [ -f "$cache/libs/pulsar-broker-4.2.4.jar" ] ||
	die "Pulsar or the driver is not installed: run bench/peers/pulsar/install.sh first"
command -v curl >/dev/null || die "curl not found: apt-get install curl"
json=$(realpath "$json")

# in_use reports whether something listens on 127.0.0.1:$1.
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_ports prints $1 distinct ports nothing listens on.
free_ports() {
	local ports=() p
	while [ ${#ports[@]} -lt "$1" ]; do
		p=$((20000 + RANDOM % 40000))
		in_use "$p" || [[ " ${ports[*]} " == *" $p "* ]] || ports+=("$p")
	done
	echo "${ports[@]}"
}

server_pid= data=

# stop_server stops the standalone this script started, by PID: SIGTERM,
# then SIGKILL if it has not exited within 30 s.
stop_server() {
	[ -n "$server_pid" ] || return 0
	kill -TERM "$server_pid" 2>/dev/null || true
	for _ in $(seq 60); do
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.5
	done
	if kill -0 "$server_pid" 2>/dev/null; then
		echo "pulsar bench: standalone $server_pid still up 30 s after SIGTERM, killing it" >&2
		kill -KILL "$server_pid" 2>/dev/null || true
	fi
	wait "$server_pid" 2>/dev/null || true
	server_pid=
}

cleanup() {
	stop_server
	if [ -n "$data" ] && [ "${PULSAR_KEEP_DATA:-}" != 1 ]; then rm -rf "$data"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# server_logs shows the end of the standalone's logs, after a failure.
server_logs() {
	echo "--- $data/server.out (last lines)" >&2
	tail -n 20 "$data/server.out" >&2 2>/dev/null || true
	echo "--- $data/pulsar.log (last lines)" >&2
	tail -n 20 "$data/pulsar.log" >&2 2>/dev/null || true
}

# start_server starts a standalone for variant $1 in a fresh $data and waits
# until it serves the public/default namespace.
start_server() {
	local variant=$1 sync
	case $variant in durable) sync=true ;; default) sync=false ;; esac
	mkdir -p "${TERN_BENCH_DIR:-/var/tmp/tern-bench}"
	data=$(mktemp -d "${TERN_BENCH_DIR:-/var/tmp/tern-bench}/pulsar-XXXXXX")
	read -r broker_port web_port bookie_port bookie_http_port <<<"$(free_ports 4)"
	sed -e "s/@BROKER_PORT@/$broker_port/" -e "s/@WEB_PORT@/$web_port/" \
		-e "s/@BOOKIE_HTTP_PORT@/$bookie_http_port/" -e "s/@JOURNAL_SYNC_DATA@/$sync/" \
		"$here/standalone.conf.in" >"$data/standalone.conf"

	# JVM flags as Pulsar's bin/pulsar and conf/pulsar_env.sh set them, less
	# the GC thread counts meant for big machines and the GC log.
	# shellcheck disable=SC2086 # PULSAR_MEM is a list of flags
	(cd "$data" && exec java ${PULSAR_MEM:--Xms1g -Xmx1g -XX:MaxDirectMemorySize=2g} \
		-XX:+UseG1GC -XX:MaxGCPauseMillis=10 -XX:+ParallelRefProcEnabled -XX:+DisableExplicitGC \
		-Dpulsar.allocator.exit_on_oom=true -Dio.netty.recycler.maxCapacityPerThread=4096 \
		-Djava.net.preferIPv4Stack=true -Dio.netty.tryReflectionSetAccessible=true \
		--add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.util.zip=ALL-UNNAMED \
		--add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED \
		--add-opens java.base/sun.net=ALL-UNNAMED --add-opens java.management/sun.management=ALL-UNNAMED \
		-Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver \
		-Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver \
		-Dlog4j.configurationFile="$here/log4j2.properties" -Dlog4j.shutdownHookEnabled=false \
		-Dpulsar.log.file="$data/pulsar.log" \
		-cp "$cache/libs/*" org.apache.pulsar.PulsarStandaloneStarter \
		--config "$data/standalone.conf" --no-functions-worker --no-stream-storage \
		--metadata-dir "$data/metadata" --bookkeeper-dir "$data/bookkeeper" \
		--zookeeper-dir "$data/zookeeper" --bookkeeper-port "$bookie_port" \
		>"$data/server.out" 2>&1) &
	server_pid=$!

	local web=http://127.0.0.1:$web_port/admin/v2
	for _ in $(seq 240); do
		kill -0 "$server_pid" 2>/dev/null || { server_logs; echo "pulsar bench: the standalone exited while starting" >&2; return 1; }
		# The tenant is created before its namespace; asking for the
		# namespaces of a tenant not there yet logs an error.
		if curl -sf "$web/tenants" | grep -q '"public"' &&
			curl -sf "$web/namespaces/public" | grep -q '"public/default"'; then
			check_journal "$variant" "$sync" "http://127.0.0.1:$bookie_http_port"
			return
		fi
		sleep 0.5
	done
	server_logs
	echo "pulsar bench: the standalone did not serve public/default within 120 s" >&2
	return 1
}

# check_journal fails unless the bookie runs with journalSyncData=$2 and
# journalWriteData=true, as its admin endpoint at $3 reports them.
check_journal() {
	local conf
	conf=$(curl -sf "$3/api/v1/config/server_config") || {
		echo "pulsar bench: cannot read the bookie's configuration at $3/api/v1/config/server_config" >&2
		return 1
	}
	if ! grep -Eq "\"journalSyncData\" *: *\"$2\"" <<<"$conf" ||
		! grep -Eq '"journalWriteData" *: *"true"' <<<"$conf"; then
		echo "pulsar bench: variant $1 needs journalSyncData=$2 and journalWriteData=true, the bookie runs with:" >&2
		grep -E '"journal(Sync|Write)Data"' <<<"$conf" >&2 || echo "  (neither set)" >&2
		return 1
	fi
	echo "pulsar bench: $1: bookie journalSyncData=$2, journalWriteData=true (checked at $3)" >&2
}

failed=0
for variant in "${variants[@]}"; do
	for workload in "${workloads[@]}"; do
		echo "pulsar bench: $variant $workload" >&2
		if ! start_server "$variant"; then
			echo "pulsar bench: $variant $workload: not run, see above (standalone data kept in $data)" >&2
			failed=1
			PULSAR_KEEP_DATA=1 cleanup
			data=
			continue
		fi
		if ! "$driver" --workload "$workload" --variant "$variant" --addr "127.0.0.1:$broker_port" \
			--pid "$server_pid" --storage-dir "$data/bookkeeper" --json "$json" "${driver_args[@]}"; then
			echo "pulsar bench: $variant $workload failed (standalone logs in $data)" >&2
			server_logs
			failed=1
			PULSAR_KEEP_DATA=1 cleanup
			data=
			continue
		fi
		cleanup
		data=
	done
done
exit $failed
