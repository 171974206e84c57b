#!/usr/bin/env bash
# Runs the side-by-side comparison and regenerates docs/benchmarks.md:
#
#	bench/run.sh [quick|full] [SYSTEM...]
#
# quick (the default) takes about ten minutes: the durable variant of every system,
# short runs of the main workloads, and Tern's logs in object storage against
# raw PUTs and GETs to the same MinIO; and Tern's local and object logs on
# JSON-like text and random bytes with each compression. full takes one to two hours: every workload,
# every variant, longer runs, a 1 GiB catch-up read. SYSTEM limits the peers
# run (kafka nats woodpecker walrus rocksdb pulsar); Tern and the physical
# limits always run. BENCH_DURATION and BENCH_WARMUP override the
# profile's durations.
#
# Every system writes to the same disk: $TERN_BENCH_DIR, default
# /var/tmp/tern-bench (never a tmpfs: fsync must reach a disk). Builds and
# downloads go under ~/.cache/tern-bench; the raw results are kept there and
# copied to docs/benchmarks/results.jsonl, from which bench/report writes
# docs/benchmarks.md and its plots.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

profile=${1:-quick}
shift || true
case "$profile" in
quick)
	duration=3s warmup=1s
	workloads=(sync-1k conc-4k conc-64k async-100b e2e-1k catchup-1g pubsub-1k)
	catchup_bytes=268435456
	# An object store's catch-up reads a second per GiB: shorter runs
	# measure the disk's bursts more than the reader.
	obj_catchup_bytes=1073741824
	variants=(--variant durable)
	;;
full)
	duration=30s warmup=5s
	workloads=(sync-1k conc-4k conc-64k async-100b e2e-1k catchup-1g pubsub-5m pubsub-1m pubsub-64k pubsub-1k)
	catchup_bytes=1073741824
	obj_catchup_bytes=4294967296
	variants=()
	;;
*)
	echo "usage: bench/run.sh [quick|full] [SYSTEM...]" >&2
	exit 2
	;;
esac
# BENCH_DURATION and BENCH_WARMUP override the profile's, to try a
# profile out quickly.
duration=${BENCH_DURATION:-$duration} warmup=${BENCH_WARMUP:-$warmup}
peers=("$@")
if [[ ${#peers[@]} -eq 0 ]]; then
	peers=(kafka nats woodpecker walrus rocksdb pulsar)
fi

cache="${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench"
data=${TERN_BENCH_DIR:-/var/tmp/tern-bench}
mkdir -p "$cache/bin" "$cache/results" "$data"
if [[ "$(stat -f -c %T "$data")" == tmpfs ]]; then
	echo "run.sh: $data is a tmpfs, where fsync costs nothing: set TERN_BENCH_DIR to a directory on a disk" >&2
	exit 1
fi
stamp=$(date -u +%Y%m%dT%H%M%SZ)
results="$cache/results/$stamp.jsonl"
setup="$cache/results/$stamp.setup.json"
log="$cache/results/$stamp.log"
: >"$results"
echo "run.sh: $profile profile; results in $results, log in $log"

scripts/install >>"$log" 2>&1 || { echo "run.sh: scripts/install failed: see $log" >&2; exit 1; }
go build -o "$cache/bin/tern" ./cmd/tern
tern="$cache/bin/tern"

# catchup and pubsub runs take their size from the profile, not a duration;
# objsizes for the runs on the object store.
sizes() {
	case "$1" in
	catchup-*) echo --total-bytes "$catchup_bytes" ;;
	esac
}
objsizes() {
	case "$1" in
	catchup-*) echo --total-bytes "$obj_catchup_bytes" ;;
	esac
}

# compression_runs WHAT ARGS... runs tern bench ARGS on JSON-like text and
# on random bytes, without compression and with each codec: logical MB/s,
# and stored bytes per logical byte (the result's extra figures). These
# runs name their payload, which puts them in the report's compression
# section instead of their workload's table.
compression_runs() {
	local what=$1 payload c
	shift
	for payload in json random; do
		for c in none lz4 zstd; do
			"$tern" bench "$@" --payload "$payload" --compression "$c" --duration "$duration" --warmup "$warmup" \
				--json "$results" 2>>"$log" | tee -a "$log" ||
				failed+=("tern $what --payload $payload --compression $c: failed")
		done
	done
}

failed=()
echo "== Tern and the disk's limits"
for w in "${workloads[@]}"; do
	# shellcheck disable=SC2046
	"$tern" bench disk --data "$data" --workload "$w" --duration "$duration" $(sizes "$w") --json "$results" 2>>"$log" | tee -a "$log" ||
		failed+=("disk $w: failed")
	# shellcheck disable=SC2046
	"$tern" bench --data "$data" --workload "$w" --duration "$duration" --warmup "$warmup" $(sizes "$w") --json "$results" 2>>"$log" | tee -a "$log" ||
		failed+=("tern $w: failed")
	# What the zeros written ahead of small rounds buy (tern serve
	# --zero-ahead), in the same run: the same log without them.
	if [[ $w == sync-1k ]]; then
		"$tern" bench --data "$data" --workload "$w" --zero-ahead 0 --duration "$duration" --warmup "$warmup" --json "$results" 2>>"$log" | tee -a "$log" ||
			failed+=("tern $w --zero-ahead 0: failed")
	fi
done

# A WAL's normal life: each log truncated behind its writer, so segments are
# deleted and their files written over by new ones (tern serve
# --reuse-segments), next to the same runs with the files removed instead.
echo "== Tern's local logs truncated behind the writer: segment files reused, and not"
for w in sync-1k conc-4k; do
	seg=64MiB keep=128MiB
	if [[ $w == sync-1k ]]; then seg=1MiB keep=2MiB; fi
	for reuse in 2 -1; do
		"$tern" bench --data "$data" --workload "$w" --segment-size "$seg" --truncate-behind "$keep" --reuse-segments "$reuse" \
			--duration "$duration" --warmup "$warmup" --json "$results" 2>>"$log" | tee -a "$log" ||
			failed+=("tern $w --truncate-behind $keep --reuse-segments $reuse: failed")
	done
done

echo "== Compression: Tern's local logs"
compression_runs conc-4k --data "$data" --workload conc-4k

# The server's targets: Tern through its gRPC server (in process, on
# loopback), next to Tern embedded and the disk, in the same run. conc-1k's
# target is a ratio to embedded, so it runs as alternating pairs and records
# the median one of those the host left alone (its steal moves single runs
# by a third).
echo "== Tern through its gRPC server"
for w in sync-1k conc-1k e2e-10k; do
	if [[ $w != sync-1k ]]; then
		"$tern" bench disk --data "$data" --workload "$w" --duration "$duration" --json "$results" 2>>"$log" | tee -a "$log" ||
			failed+=("disk $w: failed")
	fi
	if [[ $w == conc-1k ]]; then
		"$tern" bench --grpc --pairs 5 --data "$data" --workload "$w" --duration "$duration" --warmup "$warmup" --json "$results" 2>>"$log" | tee -a "$log" ||
			failed+=("tern --grpc --pairs 5 $w: failed")
		continue
	fi
	if [[ $w != sync-1k ]]; then
		"$tern" bench --data "$data" --workload "$w" --duration "$duration" --warmup "$warmup" --json "$results" 2>>"$log" | tee -a "$log" ||
			failed+=("tern $w: failed")
	fi
	"$tern" bench --grpc --data "$data" --workload "$w" --duration "$duration" --warmup "$warmup" --json "$results" 2>>"$log" | tee -a "$log" ||
		failed+=("tern --grpc $w: failed")
done

# Quorum logs on a cluster of tern serve nodes on this machine (an etcd in
# the benchmark's process, the nodes' journals all on $data): each workload
# next to the disk's limit, in the same run. Their throughput is held
# against the disk's bandwidth divided by the replicas that write to it, so
# the sealed segments go to a directory in memory (/dev/shm) where there is
# one, standing for the object store on other machines: on $data they would
# be a fourth write to the same disk. Woodpecker's service mode runs the
# same workloads next. Then the fail-over time, at the nodes' default lease
# and at a short one.
echo "== Tern on a cluster: quorum logs"
objects=()
if [[ -d /dev/shm && -w /dev/shm ]]; then
	objects=(--storage "dir:///dev/shm/tern-bench-objects")
fi
for w in quorum-1k quorum-put; do
	"$tern" bench disk --data "$data" --workload "$w" --duration "$duration" --json "$results" 2>>"$log" | tee -a "$log" ||
		failed+=("disk $w: failed")
	"$tern" bench --data "$data" --cluster 3 --workload "$w" --duration "$duration" --warmup "$warmup" "${objects[@]}" --json "$results" 2>>"$log" | tee -a "$log" ||
		failed+=("tern --cluster $w: failed")
done
rm -rf /dev/shm/tern-bench-objects
# Woodpecker's quorum mode on the same workloads, in the same run: its
# service mode, 3 LogStore processes acked at 2 (bench/peers/README.md),
# in a network namespace of its own, as its LogStores bind 0.0.0.0.
if [[ " ${peers[*]} " == *" woodpecker "* ]]; then
	if bench/peers/woodpecker/install.sh >>"$log" 2>&1; then
		TERN_BENCH_DIR=$data bench/peers/woodpecker/bench.sh --json "$results" --system woodpecker-service \
			--duration "$duration" --warmup "$warmup" quorum-1k quorum-put 2>&1 | tee -a "$log" ||
			failed+=("woodpecker-service quorum-1k quorum-put: failed")
	else
		failed+=("woodpecker: install failed")
	fi
fi
for ttl in 10s 2s; do
	"$tern" bench failover --data "$data" --node-ttl "$ttl" --kills 5 --json "$results" 2>>"$log" | tee -a "$log" ||
		failed+=("tern failover --node-ttl $ttl: failed")
done

echo "== the object store's limits (MinIO), and Tern's logs in object storage"
minio_dir=$(mktemp -d "$data/minio-XXXXXX")
minio_pid=
stop_minio() {
	if [[ -n $minio_pid ]]; then
		kill "$minio_pid" 2>/dev/null || true
		while kill -0 "$minio_pid" 2>/dev/null; do sleep 0.1; done
		minio_pid=
	fi
	rm -rf "$minio_dir" "$minio_dir.log"
}
trap stop_minio EXIT
read -r endpoint minio_pid access secret < <(scripts/minio-server "$minio_dir")
[[ -n $minio_pid ]] || { echo "run.sh: MinIO did not start: see $minio_dir.log" >&2; exit 1; }
export AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret
for args in "--size 1KiB --concurrency 1" "--size 4MiB --concurrency 8"; do
	# shellcheck disable=SC2086
	if ! "$tern" bench s3 "s3://tern-bench?endpoint=$endpoint&tls=false" --create-bucket $args \
		--duration "$duration" --json "$results" 2>>"$log" | tee -a "$log"; then
		echo "run.sh: tern bench s3 $args failed: see $log" >&2
		failed+=("s3 $args: failed")
	fi
done
# Tern's logs in object storage (default flush settings: 4 MiB, 20 ms, 4
# uploads), each workload right after the limit it is held against: raw PUTs
# or GETs of the same object size and requests in flight (tern bench s3
# --workload says which), on the same MinIO. Tern's metadata is in bbolt in
# a directory under $data; each run writes under a prefix of its own and
# deletes its objects. Every s3:// URL speaks HTTPS unless it says tls=false,
# and this MinIO speaks plain HTTP.
for w in obj-put obj-1k catchup-1g; do
	# shellcheck disable=SC2046
	"$tern" bench s3 "s3://tern-bench?endpoint=$endpoint&tls=false" --create-bucket --workload "$w" $(objsizes "$w") \
		--duration "$duration" --json "$results" 2>>"$log" | tee -a "$log" ||
		failed+=("s3 --workload $w: failed")
	# shellcheck disable=SC2046
	"$tern" bench --data "$data" --storage "s3://tern-bench?endpoint=$endpoint&tls=false" --workload "$w" \
		--duration "$duration" --warmup "$warmup" $(objsizes "$w") --json "$results" 2>>"$log" | tee -a "$log" ||
		failed+=("tern --storage $w: failed")
done
echo "== Compression: Tern's logs in object storage"
compression_runs "--storage obj-put" --data "$data" --storage "s3://tern-bench?endpoint=$endpoint&tls=false" --workload obj-put
stop_minio

for p in "${peers[@]}"; do
	echo "== $p"
	if ! "bench/peers/$p/install.sh" >>"$log" 2>&1; then
		echo "run.sh: bench/peers/$p/install.sh failed: see $log; going on without $p" >&2
		failed+=("$p: install failed")
		continue
	fi
	for w in "${workloads[@]}"; do
		# shellcheck disable=SC2046
		if ! TERN_BENCH_DIR=$data "bench/peers/$p/bench.sh" --json "$results" --duration "$duration" --warmup "$warmup" \
			"${variants[@]}" $(sizes "$w") "$w" 2>&1 | tee -a "$log"; then
			echo "run.sh: bench/peers/$p/bench.sh $w failed: see $log" >&2
			failed+=("$p $w: failed")
		fi
	done
done

# What the report says about the machine and the versions.
disk_dev=$(df --output=source "$data" | tail -1)
TERN_BENCH_DIR=$data python3 - "$setup" "$profile" "$disk_dev" "${failed[@]}" <<'PY'
import json, os, platform, subprocess, sys, datetime
out, profile, dev, failed = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
mem = next(int(l.split()[1]) * 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal"))
fs = subprocess.run(["findmnt", "-no", "FSTYPE", "-T", os.environ.get("TERN_BENCH_DIR", "/var/tmp/tern-bench")], capture_output=True, text=True).stdout.strip()
json.dump({
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
    "profile": profile,
    "command": "bench/run.sh " + profile,
    "host": {"cpu": cpu, "cores": os.cpu_count(), "memory_bytes": mem, "kernel": platform.release(), "disk": dev, "filesystem": fs},
    "go": subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True).stdout.strip(),
    "failed": failed,
    # Variants other than "durable" that still acknowledge only what is on
    # disk (or in the object store): Woodpecker's with a 1 ms sync tick.
    "durable_at_ack": {"woodpecker": ["tuned-1ms"], "woodpecker-minio": ["tuned-1ms"], "tern": ["gRPC"]},
}, open(out, "w"), indent=1)
PY

mkdir -p docs/benchmarks
cp "$results" docs/benchmarks/results.jsonl
cp "$setup" docs/benchmarks/setup.json
(cd bench/report && go run . --results "$root/docs/benchmarks/results.jsonl" --setup "$root/docs/benchmarks/setup.json" \
	--notes "$root/docs/benchmarks/notes.md" --out "$root/docs/benchmarks.md" --img "$root/docs/benchmarks")
echo "run.sh: wrote docs/benchmarks.md"
if [[ ${#failed[@]} -gt 0 ]]; then
	printf 'run.sh: %s\n' "${failed[@]}" >&2
fi
