#!/usr/bin/env bash
# Installs the pinned Apache Pulsar 4.2.4 standalone and builds the driver:
#
#   <cache>/libs/   the jars of org.apache.pulsar:pulsar-broker:4.2.4 (which
#                   holds org.apache.pulsar.PulsarStandaloneStarter) and of
#                   everything it needs at run time, from Maven Central
#   <cache>/bin/pulsar-driver
#
# where <cache> is ${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/pulsar.
# Idempotent: the jars are fetched again only when pom.xml changed.
# Needs java 17 or newer, mvn and go.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/tern-bench/pulsar

die() { echo "pulsar install: $*" >&2; exit 1; }

for tool in java mvn go; do
	command -v "$tool" >/dev/null || die "$tool not found: install it (Debian: apt-get install openjdk-17-jre-headless maven; Go from go.dev) and run again"
done
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
[ "${java_major:-0}" -ge 17 ] || die "Pulsar 4.2's broker needs Java 17 or newer, found ${java_major:-none}: apt-get install openjdk-17-jre-headless"

mkdir -p "$cache/bin"

# The jars. Pulsar's poms name other repositories than Maven Central, and
# only Central is reachable here: settings.xml mirrors them all to it.
stamp=$(sha256sum "$here/pom.xml" | cut -d' ' -f1)
if [ "$(cat "$cache/libs/.pom.sha256" 2>/dev/null)" != "$stamp" ]; then
	echo "pulsar install: fetching the Pulsar 4.2.4 jars into $cache/libs (a few minutes cold)" >&2
	rm -rf "$cache/libs.tmp"
	if ! mvn -B -q -s "$here/settings.xml" -f "$here/pom.xml" dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$cache/libs.tmp" >"$cache/mvn.log" 2>&1; then
		tail -n 30 "$cache/mvn.log" >&2
		die "mvn could not fetch the Pulsar jars (full log: $cache/mvn.log); check that Maven Central is reachable"
	fi
	[ -f "$cache/libs.tmp/pulsar-broker-4.2.4.jar" ] || die "mvn succeeded but pulsar-broker-4.2.4.jar is missing from $cache/libs.tmp"
	echo "$stamp" >"$cache/libs.tmp/.pom.sha256"
	rm -rf "$cache/libs"
	mv "$cache/libs.tmp" "$cache/libs"
fi

# The driver.
(cd "$here" && go build -trimpath -o "$cache/bin/pulsar-driver" .) ||
	die "building the driver failed (go build in $here)"

echo "pulsar install: ready in $cache ($(ls "$cache/libs" | wc -l) jars, driver bin/pulsar-driver)" >&2
