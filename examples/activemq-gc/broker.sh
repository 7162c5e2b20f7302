#!/usr/bin/env bash
# One ActiveMQ broker, in the foreground, from the current folder (its data, its temporary
# files), with the configuration in CONF (prepare.sh's), a 512 MiB heap, and the JVM
# options in $JAVA_GC (the garbage collector): what run.sh gives loadmix to start.
# Usage: JAVA_GC=-XX:+UseG1GC broker.sh CONF
set -euo pipefail
CONF=${1:?usage: broker.sh CONF}
# shellcheck source=scripts/lib/activemq.sh
. "$(dirname "$0")/../../scripts/lib/activemq.sh"
# shellcheck disable=SC2086
activemq_exec "$PWD" "$CONF" 512m ${JAVA_GC:-}
