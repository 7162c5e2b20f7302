#!/usr/bin/env bash
# Two DAViCal servers on loopback, identical but for one PostgreSQL setting, each on a
# PostgreSQL cluster of its own, from Debian's packages (installed when missing):
#   on:  synchronous_commit = on   (every commit waits for its WAL flush)
#   off: synchronous_commit = off  (commits return before the flush)
# Both clusters get the same shared_buffers; DAViCal's database is made by DAViCal's own
# script, with the admin account's password set to $LOADMIX_PASSWORD.
#
# Each cluster gets its own prometheus-postgres-exporter, so its database's counters
# (commits, rows inserted, backends) can be scraped during that configuration's rounds.
#
# Usage: setup.sh WORKDIR   (writes WORKDIR/targets.env: URL_ON, URL_OFF, each Apache's
# access log of one METHOD STATUS line per request LOG_ON, LOG_OFF, each database's
# PGSOCK_ON/PGPORT_ON, PGSOCK_OFF/PGPORT_OFF and its exporter's METRICS_ON, METRICS_OFF;
# stop.sh WORKDIR stops everything). Must run as root (PostgreSQL runs as the postgres
# user).
set -euo pipefail
WORK=${1:?usage: setup.sh WORKDIR}
: "${LOADMIX_PASSWORD:?set LOADMIX_PASSWORD: it becomes the DAViCal admin password}"
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

need=()
[ -f /usr/share/davical/dba/create-database.sh ] || need+=(davical)
[ -d /usr/lib/postgresql ] || need+=(postgresql)
command -v apache2 >/dev/null || need+=(apache2)
ls /usr/lib/apache2/modules/libphp*.so >/dev/null 2>&1 || need+=(libapache2-mod-php)
command -v prometheus-postgres-exporter >/dev/null || need+=(prometheus-postgres-exporter)
if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]}" >&2
    # Packages must not start system services in a container.
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    (apt-get install -y -qq "${need[@]}" || (apt-get update -qq && apt-get install -y -qq "${need[@]}")) >/dev/null
    rm -f /usr/sbin/policy-rc.d
fi
PG=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
M=/usr/lib/apache2/modules
PHP=$(ls $M/libphp*.so | head -1)
# shellcheck source=scripts/lib/servers.sh
. "$(dirname "$0")/../../scripts/lib/servers.sh"
chmod 755 "$WORK"
: >"$WORK/targets.env"
for variant in on off; do
    D="$WORK/$variant"
    mkdir -p "$D/pg" "$D/sock" "$D/apache"
    chown postgres "$D/pg" "$D/sock"
    PGPORT=$(free_port)
    su postgres -c "$PG/initdb -D $D/pg --auth=trust -U postgres" >"$D/initdb.log" 2>&1
    cat >>"$D/pg/postgresql.conf" <<CONF
synchronous_commit = $variant
shared_buffers = 128MB
max_connections = 200
CONF
    su postgres -c "$PG/pg_ctl -D $D/pg -l $D/pg/server.log -w -o '-k $D/sock -p $PGPORT -c listen_addresses=' start" >/dev/null
    su postgres -c "PGHOST=$D/sock PGPORT=$PGPORT /usr/share/davical/dba/create-database.sh davical '$LOADMIX_PASSWORD'" >"$D/davical-db.log" 2>&1
    NAME="davical-$variant-$$"
    cat >"/etc/davical/$NAME-conf.php" <<CONF
<?php
\$c->pg_connect[] = "dbname=davical user=davical_app host=$D/sock port=$PGPORT";
\$c->system_name = "DAViCal, synchronous_commit=$variant";
\$c->admin_email = "admin@loadmix.invalid";
CONF
    echo "/etc/davical/$NAME-conf.php" >>"$WORK/conf-files"
    PORT=$(free_port)
    cat >"$D/apache/httpd.conf" <<CONF
ServerRoot $D/apache
ServerName $NAME
PidFile $D/apache/httpd.pid
Listen 127.0.0.1:$PORT
LoadModule mpm_prefork_module $M/mod_mpm_prefork.so
LoadModule authz_core_module $M/mod_authz_core.so
LoadModule alias_module $M/mod_alias.so
LoadModule mime_module $M/mod_mime.so
TypesConfig /etc/mime.types
LoadModule php_module $PHP
ErrorLog $D/apache/error.log
# One "METHOD STATUS" line per request, to hold a run's counts against; not the
# "OPTIONS *" Apache sends itself to wake its children (its internal dummy connection).
LoadModule setenvif_module $M/mod_setenvif.so
SetEnvIf User-Agent "internal dummy connection" dummy
LogFormat "%m %>s" plain
CustomLog $D/apache/access.log plain env=!dummy
UseCanonicalName On
DocumentRoot /usr/share/davical/htdocs
AcceptPathInfo On
StartServers 4
MaxRequestWorkers 32
<Directory /usr/share/davical/htdocs>
  Require all granted
</Directory>
<FilesMatch "\.php\$">
  SetHandler application/x-httpd-php
</FilesMatch>
php_value include_path /usr/share/awl/inc
php_value error_reporting "E_ALL & ~E_NOTICE & ~E_DEPRECATED"
Redirect 301 /.well-known/caldav /caldav.php/
CONF
    apache2 -f "$D/apache/httpd.conf" -k start
    wait_port "$PORT"
    EPORT=$(free_port)
    DATA_SOURCE_NAME="host=$D/sock port=$PGPORT user=postgres dbname=davical sslmode=disable" \
        prometheus-postgres-exporter --web.listen-address="127.0.0.1:$EPORT" >"$D/exporter.log" 2>&1 &
    echo $! >"$D/exporter.pid"
    wait_port "$EPORT"
    V=$(echo $variant | tr a-z A-Z)
    {
        echo "URL_$V=http://127.0.0.1:$PORT/caldav.php"
        echo "LOG_$V=$D/apache/access.log"
        echo "PGSOCK_$V=$D/sock"
        echo "PGPORT_$V=$PGPORT"
        echo "METRICS_$V=http://127.0.0.1:$EPORT/metrics"
    } >>"$WORK/targets.env"
done
cat "$WORK/targets.env"
