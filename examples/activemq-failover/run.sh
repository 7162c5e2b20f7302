#!/usr/bin/env bash
# ActiveMQ Classic 5.17 (Debian) on KahaDB against the JDBC store on a PostgreSQL of its
# own, each broker started by loadmix (--start), killed mid-round (SIGKILL to its JVM),
# started again on the same store and waited for; the two stores compared by what the kill
# cost: time to detect, time to recover, the dip, the failures, and every message the
# broker had receipted and then lost (must be 0: a durability breach otherwise).
# Usage: examples/activemq-failover/run.sh [OUT=reports/activemq-failover] [ROUNDS=3] [DURATION=40s] [AT=15s]
# The tables are OUT/compare.txt (faults: recover, detect, dip, failed per store) and each
# store's OUT/STORE/report.txt (its fault table and its ledger).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-reports/activemq-failover}
ROUNDS=${2:-3}
DURATION=${3:-40s}
AT=${4:-15s}
BIN=${LOADMIX_BIN:-target/release/loadmix}
[ -x "$BIN" ] || cargo build --release --locked -q
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
# shellcheck source=scripts/lib/activemq.sh
. scripts/lib/activemq.sh
activemq_install
# A folder of its own, outside the repository: PostgreSQL's user must reach it.
WORK=$(mktemp -d)
stop_all() {
    [ -d "$WORK/pg" ] && su postgres -c "$PG/pg_ctl -D $WORK/pg -m fast stop" >/dev/null 2>&1
    rm -rf "$WORK"
}
trap stop_all EXIT
activemq_postgres "$WORK" activemq_jdbc
STARTS=()
for b in kahadb jdbc; do
    STOMP=$(free_port)
    case $b in
    kahadb) STORE='<kahaDB directory="${activemq.base}/data/kahadb"/>' DBPORT=0 DB=none ;;
    jdbc) STORE='<jdbcPersistenceAdapter dataSource="#postgres-ds" createTablesOnStartup="true"/>' DBPORT=$PGPORT DB=activemq_jdbc ;;
    esac
    activemq_conf "$WORK/$b/conf" "$b" "$STORE" "$STOMP" "$(free_port)" "" "$DBPORT" "$DB"
    # The command loadmix starts, and starts again after the kill: the broker on the
    # same base, so the same store.
    cat >"$WORK/$b/start.sh" <<SH
#!/usr/bin/env bash
. "$PWD/scripts/lib/activemq.sh"
activemq_exec "$WORK/$b" "$WORK/$b/conf" 512m
SH
    chmod +x "$WORK/$b/start.sh"
    STARTS+=(--target "$b=stomp://127.0.0.1:$STOMP" --start "$b=exec $WORK/$b/start.sh"
        --ready "$b=tcp://127.0.0.1:$STOMP")
done
"$BIN" run examples/activemq-failover/failover.yaml "${STARTS[@]}" \
    --rounds "$ROUNDS" --duration "$DURATION" --ready-timeout 2m \
    --set "faults.0.at=$AT" --quiet \
    --note "ActiveMQ 5.17: KahaDB vs JDBC on PostgreSQL, the broker killed at $AT and started again" \
    --out "$OUT" >/dev/null || [ $? -eq 1 ]
cat "$OUT/compare.txt"
for b in kahadb jdbc; do
    echo "== $b"
    # Its ledger (what was lost, and of that what had been receipted) and its fault table.
    awk '/^messages:/ {on = 1} /^faults/ {on = 2} on {print} on == 2 && /^  detect:/ {exit}' \
        "$OUT/$b/report.txt"
done
