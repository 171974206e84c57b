#!/usr/bin/env bash
# Installs the Kafka peer: the jars of Apache Kafka 4.3.1 (from Maven
# Central, as pom.xml pins them) and the Go driver, all under
# ${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/kafka/. Idempotent: the jars are
# fetched again only when pom.xml changes; the driver is always rebuilt
# (Go's build cache makes that quick).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/kafka

die() { echo "kafka/install.sh: $*" >&2; exit 1; }

command -v java >/dev/null || die "java not found: install a Java 17 runtime (apt-get install openjdk-17-jre-headless)"
command -v mvn >/dev/null || die "mvn not found: install Maven (apt-get install maven)"
command -v go >/dev/null || die "go not found: install Go 1.26 (the toolchain github.com/ternwal/tern uses)"

mkdir -p "$cache/bin"

# The jars. A stamp holding pom.xml's checksum says the libs directory is
# complete for this pom; a partial copy is never taken for a finished one.
want=$(sha256sum "$here/pom.xml" | cut -d' ' -f1)
if [[ ! -f "$cache/libs/.pom.sha256" || $(cat "$cache/libs/.pom.sha256") != "$want" ]]; then
	echo "kafka/install.sh: fetching the Kafka 4.3.1 jars with Maven into $cache/libs" >&2
	rm -rf "$cache/libs.tmp"
	mvn -q -B -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies \
		-DoutputDirectory="$cache/libs.tmp" -DincludeScope=runtime ||
		die "mvn dependency:copy-dependencies failed: check that Maven Central is reachable (see the output above)"
	[[ -f "$cache/libs.tmp/kafka_2.13-4.3.1.jar" ]] || die "Maven finished but kafka_2.13-4.3.1.jar is not in $cache/libs.tmp"
	echo "$want" >"$cache/libs.tmp/.pom.sha256"
	rm -rf "$cache/libs"
	mv "$cache/libs.tmp" "$cache/libs"
fi

# The driver. It calls loadgen.Run from the main module (through the
# replace directive in go.mod).
[[ -f "$here/../../loadgen/run.go" ]] || die "bench/loadgen/run.go is missing: the driver needs loadgen.Run; update the work tree and run this again"
(cd "$here" && go build -o "$cache/bin/kafka-driver.tmp" .) || die "building the driver failed (see the compiler output above)"
mv "$cache/bin/kafka-driver.tmp" "$cache/bin/kafka-driver"

echo "kafka/install.sh: ready: $cache/libs ($(ls "$cache/libs" | wc -l) jars), $cache/bin/kafka-driver" >&2
