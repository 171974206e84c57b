#!/usr/bin/env bash
# Installs librocksdb-dev 7.8.3 from Debian (if its header is missing) and
# builds the driver, bench/peers/rocksdb, into
# ${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/rocksdb/bin/rocksdb-bench.
set -euo pipefail
cd "$(dirname "$0")"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/rocksdb"
want=7.8.

if [ ! -f /usr/include/rocksdb/c.h ]; then
	echo "rocksdb: installing librocksdb-dev with apt-get" >&2
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y librocksdb-dev >&2; then
		apt-get update >&2 && apt-get install -y librocksdb-dev >&2 ||
			{ echo "rocksdb: apt-get install librocksdb-dev failed (run as root on Debian bookworm)" >&2; exit 1; }
	fi
fi
have=$(dpkg-query -W -f='${Version}' librocksdb-dev 2>/dev/null || true)
case "$have" in
$want*) ;;
*)
	echo "rocksdb: librocksdb-dev is '$have', want $want*: grocksdb v1.7.14 builds against 7.8 only (Debian bookworm has 7.8.3)" >&2
	exit 1
	;;
esac

mkdir -p "$cache/bin"
go build -o "$cache/bin/rocksdb-bench" . ||
	{ echo "rocksdb: building the driver failed (is Go 1.26 on PATH and librocksdb-dev $want* installed?)" >&2; exit 1; }
echo "rocksdb: librocksdb-dev $have, driver $cache/bin/rocksdb-bench" >&2
