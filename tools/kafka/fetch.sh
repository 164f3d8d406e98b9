#!/usr/bin/env bash
# tools/kafka/fetch.sh VERSION: the jars of tools/kafka/VERSION/pom.xml into .tools/kafka/VERSION/lib
# (`make kafka-tools` runs it per pinned version). Maven resolves into the project's own local
# repository .tools/m2 (nothing lands in ~/.m2) and fails on a checksum mismatch (-C). The stamp
# holds the POM's sha256: with a matching stamp and the jars in place nothing runs; otherwise the
# local repository is tried offline first, so Maven Central is reached only for what it lacks.
set -euo pipefail
v=${1:?usage: tools/kafka/fetch.sh VERSION}
root=$(cd "$(dirname "$0")/../.." && pwd)
pom=$root/tools/kafka/$v/pom.xml
dest=$root/.tools/kafka/$v
stamp=$dest/.stamp
sum=$(sha256sum "$pom" | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$sum" && -f $dest/lib/kafka_2.13-$v.jar ]]; then
    exit 0
fi
mvn=(${MVN:-mvn} -B -q -C -Dstyle.color=never -Dmaven.repo.local="$root/.tools/m2" -f "$pom")
rm -rf "$dest/lib" "$stamp"
start=$(date +%s)
if ! "${mvn[@]}" -o dependency:copy-dependencies >/dev/null 2>&1; then
    echo "kafka-tools: resolving Apache Kafka $v from Maven Central ($pom)"
    rm -rf "$dest/lib"
    "${mvn[@]}" dependency:copy-dependencies
fi
echo "$sum" > "$stamp"
echo "kafka-tools: Apache Kafka $v in .tools/kafka/$v/lib ($(ls "$dest/lib" | wc -l) jars, $(( $(date +%s) - start ))s)"
