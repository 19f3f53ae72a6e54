#!/usr/bin/env bash
# Writes the Java producer's configs at an apache/kafka tag as kdiag's catalog
# rows (rules/upstream/java-producer-<major.minor>.tsv): the tag's
# clients/src/main/java is compiled with javac (ProducerConfig and what it
# needs; slf4j-api from Debian's libslf4j-java) and ConfigDump prints its
# ConfigDef. A kafka-clients jar built from the tag gives the same rows:
#   rules/upstream/java-configs.sh --jar kafka-clients-2.1.1.jar 2.1.1
#
#   rules/upstream/java-configs.sh APACHE_KAFKA_GIT_DIR TAG > rules/upstream/java-producer-2.1.tsv
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
slf4j=/usr/share/java/slf4j-api.jar
[ -f "$slf4j" ] || { echo "needs $slf4j (apt-get install libslf4j-java)" >&2; exit 2; }
[ $# -ge 2 ] || { echo "usage: $0 APACHE_KAFKA_GIT_DIR TAG | --jar KAFKA_CLIENTS_JAR TAG" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$1" = --jar ]; then
  cp=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
  tag=$3
  javac -nowarn -cp "$cp:$slf4j" -d "$tmp/out" "$here/ConfigDump.java" 2>/dev/null
  from="kafka-clients jar $(basename "$2")"
else
  tag=$2
  mkdir -p "$tmp/src" "$tmp/out"
  git -C "$1" archive "$tag" clients/src/main/java | tar -x -C "$tmp/src"
  src=$tmp/src/clients/src/main/java
  javac -nowarn -cp "$slf4j" -sourcepath "$src" -d "$tmp/out" \
    "$here/ConfigDump.java" "$src/org/apache/kafka/clients/producer/ProducerConfig.java" 2>/dev/null
  cp=
  from="apache/kafka $tag clients/src/main/java"
fi
echo "# $from: ProducerConfig.CONFIG, written by rules/upstream/java-configs.sh"
printf 'name\ttype\tdefault\tvalidator\timportance\n'
java -cp "$tmp/out${cp:+:$cp}:$slf4j" ConfigDump 2>/dev/null
