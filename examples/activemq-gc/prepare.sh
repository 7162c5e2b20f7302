#!/usr/bin/env bash
# What the four ActiveMQ configurations of run.sh need before loadmix starts them: a
# PostgreSQL 15 cluster of its own on a loopback port (fsync and synchronous_commit on, as
# shipped; a database per JDBC configuration), and each configuration's activemq.xml with
# ports of its own. Writes WORKDIR/targets.env (PGPORT, and PORT_<CONFIGURATION> for each
# broker's STOMP connector). Installs activemq, libpostgresql-jdbc-java and postgresql when
# missing. Must run as root (PostgreSQL runs as the postgres user).
# Usage: prepare.sh WORKDIR
set -euo pipefail
WORK=${1:?usage: prepare.sh WORKDIR}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib/servers.sh
. "$HERE/../../scripts/lib/servers.sh"
# shellcheck source=scripts/lib/activemq.sh
. "$HERE/../../scripts/lib/activemq.sh"
activemq_install
mkdir -p "$WORK"
activemq_postgres "$WORK" activemq_g1 activemq_parallel
echo "PGPORT=$PGPORT" >"$WORK/targets.env"
KAHADB='<kahaDB directory="${activemq.base}/data/kahadb"/>'
JDBC='<jdbcPersistenceAdapter dataSource="#postgres-ds" createTablesOnStartup="true"/>'
for gc in g1 parallel; do
    for store in kahadb jdbc; do
        name="$gc-$store"
        port=$(free_port)
        case $store in
        kahadb) activemq_conf "$WORK/$name" "$name" "$KAHADB" "$port" "$(free_port)" ;;
        jdbc) activemq_conf "$WORK/$name" "$name" "$JDBC" "$port" "$(free_port)" "" "$PGPORT" "activemq_$gc" ;;
        esac
        var=${name^^}
        echo "PORT_${var//-/_}=$port" >>"$WORK/targets.env"
    done
done
cat "$WORK/targets.env"
