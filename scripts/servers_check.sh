#!/usr/bin/env bash
# Starts the kind of servers users own on loopback from Debian's and PyPI's packages
# (installed when missing) and hands them to the Rust checks of tests/real/
# (web_servers.rs, davical.rs, recipes.rs), which hold loadmix's typed report against
# what each server logged or holds. Fails, never skips, when one cannot be started.
#
#   1. nginx terminating TLS in front of Radicale (a certificate made here with
#      `loadmix cert`, and another CA's), logging `METHOD STATUS` per request;
#   2. nginx's WebDAV modules with Basic auth, logging the same way, over a share folder;
#   3. Apache's mod_dav with Digest auth, logging the same way;
#   4. the embedded server over https (`loadmix serve --tls-cert/--tls-key`);
#   5. Radicale (htpasswd) pre-filled with a calendar and events of someone else's, and
#      sixteen accounts its rights let share calendars, for a team run;
#   6. DAViCal on PostgreSQL (Apache, mod_php), set up by examples/davical-postgres, with
#      sixteen accounts for a team that shares calendars by DAViCal's ACLs, and then
#      caldav-server-tester's scheduling (RFC 6638) checks with two of them;
#   7. the recipes examples/davical-postgres and examples/tomcat-jvm, briefly;
#   8. nginx proxying the embedded server, logging with the JSON `log_format` the book
#      recommends for `infer` (taken from docs/src/infer.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh

need=()
command -v nginx >/dev/null || need+=(nginx)
[ -f /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ] || need+=(libnginx-mod-http-dav-ext)
command -v apache2 >/dev/null || need+=(apache2)
command -v openssl >/dev/null || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]}"
    # Packages must not start system services on port 80 in a container.
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    (apt-get install -y -qq "${need[@]}" || (apt-get update -qq && apt-get install -y -qq "${need[@]}")) >/dev/null
    rm -f /usr/sbin/policy-rc.d
fi
pypi_venv radicale
BIN=${CARGO_TARGET_DIR:-target}/debug/loadmix
[ -x "$BIN" ] || cargo build --locked

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
    [ -f "$WORK/apache/httpd.pid" ] && kill "$(cat "$WORK/apache/httpd.pid")" 2>/dev/null || true
    [ -d "$WORK/davical" ] && examples/davical-postgres/stop.sh "$WORK/davical"
    rm -rf "$WORK"
}
trap cleanup EXIT
[ -n "${KEEP_WORK:-}" ] && trap - EXIT
fail() { echo "servers_check: $*"; exit 1; }

PASSWORD='s3cr3t pa:ss$'
export LOADMIX_PASSWORD="$PASSWORD"
"$BIN" cert --out "$WORK/certs" --name 127.0.0.1 --name localhost 2>/dev/null
"$BIN" cert --out "$WORK/other-ca" --name 127.0.0.1 2>/dev/null

# --- Radicale (htpasswd auth, plain) behind nginx (TLS), nginx WebDAV (Basic) ---------
RPORT=$(free_port); TPORT=$(free_port); WPORT=$(free_port)
printf 'loadmix:%s\n' "$(openssl passwd -apr1 "$PASSWORD")" >"$WORK/htpasswd"
# Sixteen more accounts for a team run, which Radicale's rights let into each other's
# calendars (and nobody into loadmix's); the others are Radicale's owner_only.
for i in $(seq 1 16); do
    printf 'team-%s:%s\n' "$i" "$(openssl passwd -apr1 "$PASSWORD")" >>"$WORK/htpasswd"
    echo "team-$i" >>"$WORK/team-accounts"
done
cat >"$WORK/radicale-rights" <<'RIGHTS'
[root]
user: .+
collection:
permissions: R
[principal]
user: .+
collection: {user}
permissions: RW
[own]
user: .+
collection: {user}/[^/]+
permissions: rw
[team]
user: team-[0-9]+
collection: team-[0-9]+/[^/]+
permissions: rw
RIGHTS
cat >"$WORK/radicale.conf" <<CONF
[server]
hosts = 127.0.0.1:$RPORT
[auth]
type = htpasswd
htpasswd_filename = $WORK/htpasswd
htpasswd_encryption = autodetect
[rights]
type = from_file
file = $WORK/radicale-rights
[storage]
filesystem_folder = $WORK/radicale-data
[logging]
level = warning
CONF
.tools/venv-radicale/bin/radicale -C "$WORK/radicale.conf" >"$WORK/radicale.log" 2>&1 &
PIDS+=($!)
mkdir -p "$WORK/dav" "$WORK/nginx-tmp"
# The book's JSON log_format for `infer`, taken from the page itself so that what the book
# recommends is what is tested; nginx proxies the embedded server with it.
IPORT=$(free_port); JPORT=$(free_port)
awk '/^log_format loadmix/{on=1} on{print} on&&/;$/{exit}' docs/src/infer.md >"$WORK/infer-log-format.conf"
grep -q msec "$WORK/infer-log-format.conf" || fail "docs/src/infer.md has no nginx log_format loadmix"
"$BIN" serve --bind "127.0.0.1:$IPORT" --stomp-bind 127.0.0.1:0 >"$WORK/serve-infer.log" 2>&1 &
PIDS+=($!)
cat >"$WORK/nginx.conf" <<CONF
load_module /usr/lib/nginx/modules/ngx_http_dav_ext_module.so;
user root;
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 1024; }
http {
  log_format plain '\$request_method \$status';
  include $WORK/infer-log-format.conf;
  client_body_temp_path $WORK/nginx-tmp/body;
  proxy_temp_path $WORK/nginx-tmp/proxy;
  fastcgi_temp_path $WORK/nginx-tmp/fastcgi;
  uwsgi_temp_path $WORK/nginx-tmp/uwsgi;
  scgi_temp_path $WORK/nginx-tmp/scgi;
  server {
    listen 127.0.0.1:$TPORT ssl;
    ssl_certificate $WORK/certs/cert.pem;
    ssl_certificate_key $WORK/certs/key.pem;
    access_log $WORK/tls-access.log plain;
    location / {
      proxy_pass http://127.0.0.1:$RPORT;
      proxy_set_header Host \$http_host;
      proxy_set_header X-Forwarded-Proto https;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
  server {
    listen 127.0.0.1:$JPORT;
    access_log $WORK/infer-access.json loadmix;
    location / {
      proxy_pass http://127.0.0.1:$IPORT;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
  server {
    listen 127.0.0.1:$WPORT;
    access_log $WORK/dav-access.log plain;
    location /dav/ {
      alias $WORK/dav/;
      dav_methods PUT DELETE MKCOL COPY MOVE;
      dav_ext_methods PROPFIND OPTIONS;
      create_full_put_path on;
      auth_basic "dav";
      auth_basic_user_file $WORK/htpasswd;
      client_max_body_size 16m;
    }
  }
}
CONF
nginx -c "$WORK/nginx.conf" >"$WORK/nginx.log" 2>&1 || { cat "$WORK/nginx.log" "$WORK/nginx-error.log"; fail "nginx did not start"; }
wait_port "$RPORT" radicale "$WORK/radicale.log"
wait_port "$TPORT" nginx "$WORK/nginx.log"
wait_port "$WPORT" nginx "$WORK/nginx.log"
wait_port "$IPORT" serve "$WORK/serve-infer.log"
wait_port "$JPORT" nginx "$WORK/nginx.log"

export LOADMIX_REAL_TLS_TARGET="https://127.0.0.1:$TPORT" LOADMIX_REAL_TLS_LOG="$WORK/tls-access.log"
export LOADMIX_REAL_CA="$WORK/certs/ca.pem" LOADMIX_REAL_OTHER_CA="$WORK/other-ca/ca.pem"
export LOADMIX_REAL_NGINX_DAV="http://127.0.0.1:$WPORT/dav" LOADMIX_REAL_NGINX_DAV_LOG="$WORK/dav-access.log"
export LOADMIX_REAL_NGINX_DAV_SHARE="$WORK/dav"
export LOADMIX_REAL_NGINX_JSON="http://127.0.0.1:$JPORT/cosmo" LOADMIX_REAL_NGINX_JSON_LOG="$WORK/infer-access.json"

APORT=$(free_port)
mkdir -p "$WORK/apache/dav"
HA1=$(printf '%s' "loadmix:dav:$PASSWORD" | md5sum | cut -d' ' -f1)
printf 'loadmix:dav:%s\n' "$HA1" >"$WORK/apache/digest"
M=/usr/lib/apache2/modules
cat >"$WORK/apache/httpd.conf" <<CONF
ServerRoot $WORK/apache
ServerName localhost
PidFile $WORK/apache/httpd.pid
Listen 127.0.0.1:$APORT
LoadModule mpm_event_module $M/mod_mpm_event.so
LoadModule authn_core_module $M/mod_authn_core.so
LoadModule authn_file_module $M/mod_authn_file.so
LoadModule authz_core_module $M/mod_authz_core.so
LoadModule authz_user_module $M/mod_authz_user.so
LoadModule auth_digest_module $M/mod_auth_digest.so
LoadModule alias_module $M/mod_alias.so
LoadModule dav_module $M/mod_dav.so
LoadModule dav_fs_module $M/mod_dav_fs.so
ErrorLog $WORK/apache/error.log
LogFormat "%m %>s" plain
CustomLog $WORK/apache/access.log plain
DAVLockDB $WORK/apache/davlock
Alias /dav $WORK/apache/dav
<Directory $WORK/apache/dav>
  Dav On
  AuthType Digest
  AuthName "dav"
  AuthDigestProvider file
  AuthUserFile $WORK/apache/digest
  Require valid-user
</Directory>
CONF
apache2 -f "$WORK/apache/httpd.conf" -k start >"$WORK/apache.log" 2>&1 || { cat "$WORK/apache.log"; fail "apache did not start"; }
wait_port "$APORT" apache "$WORK/apache.log"
export LOADMIX_REAL_APACHE_DAV="http://127.0.0.1:$APORT/dav" LOADMIX_REAL_APACHE_LOG="$WORK/apache/access.log"

EPORT=$(free_port)
"$BIN" serve --bind "127.0.0.1:$EPORT" --tls-cert "$WORK/certs/cert.pem" --tls-key "$WORK/certs/key.pem" >"$WORK/serve.log" 2>&1 &
PIDS+=($!)
wait_port "$EPORT" serve "$WORK/serve.log"
export LOADMIX_REAL_EMBEDDED_HTTPS="https://127.0.0.1:$EPORT/cosmo"

# Someone else's calendar on Radicale, which the runs must never touch.
BASE="http://127.0.0.1:$RPORT/loadmix"
curl -sf -u "loadmix:$PASSWORD" -X MKCALENDAR "$BASE/precious/" >/dev/null || fail "cannot make the pre-filled calendar"
for i in 1 2 3; do
    curl -sf -u "loadmix:$PASSWORD" -X PUT -H 'Content-Type: text/calendar' --data-binary @- "$BASE/precious/e$i.ics" >/dev/null <<ICS || fail "cannot pre-fill event $i"
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//someone else//EN
BEGIN:VEVENT
UID:precious-$i
DTSTAMP:20260101T000000Z
DTSTART:20261201T0${i}0000Z
DTEND:20261201T0${i}3000Z
SUMMARY:Not loadmix's event $i
END:VEVENT
END:VCALENDAR
ICS
done
export LOADMIX_REAL_RADICALE="http://127.0.0.1:$RPORT"
export LOADMIX_REAL_RADICALE_HOME="$WORK/radicale-data/collection-root/loadmix"
export LOADMIX_REAL_RADICALE_TEAM_ACCOUNTS="$WORK/team-accounts"
echo "== 1-5. nginx TLS + Radicale, nginx WebDAV, Apache Digest, embedded https, Radicale's own data"
real_checks web_servers::
echo "== 8. infer on nginx's JSON log of a known population, and fidelity of its replay"
real_checks infer_nginx::

echo "== 6. DAViCal on PostgreSQL: only the URL and a user"
# The recipe's own set-up (examples/davical-postgres): its first server is enough here.
# PostgreSQL runs as its own user, which must reach the folder.
chmod 755 "$WORK"
examples/davical-postgres/setup.sh "$WORK/davical" >"$WORK/davical-setup.log" 2>&1 \
    || { cat "$WORK/davical-setup.log" "$WORK"/davical/*/*.log 2>/dev/null; fail "DAViCal could not be set up"; }
# shellcheck disable=SC1091
. "$WORK/davical/targets.env"
# The collections the run made, counted in DAViCal's database.
cat >"$WORK/davical-left" <<SH
#!/bin/sh
exec psql -h "$PGSOCK_ON" -p "$PGPORT_ON" -U postgres -qAt -c "SELECT count(*) FROM collection WHERE dav_name LIKE '/admin/lm-%'" davical
SH
chmod +x "$WORK/davical-left"
# Twenty-eight more accounts for a team run (its editors and pollers share calendars by
# ACL, its organizers invite its attendees).
LOADMIX_PASSWORD="$PASSWORD" examples/davical-postgres/team-accounts.sh "$PGSOCK_ON" "$PGPORT_ON" 28 \
    "$WORK/davical-team-accounts"
# The calendars the team run made and left (DAViCal makes each inbox and outbox on first
# use, and keeps them).
cat >"$WORK/davical-team-left" <<SH
#!/bin/sh
exec psql -h "$PGSOCK_ON" -p "$PGPORT_ON" -U postgres -qAt -c "SELECT count(*) FROM collection WHERE dav_name LIKE '/team-%' AND dav_name NOT LIKE '%/.in/' AND dav_name NOT LIKE '%/.out/'" davical
SH
chmod +x "$WORK/davical-team-left"
LOADMIX_REAL_DAVICAL="$URL_ON" LOADMIX_REAL_DAVICAL_LEFT="$WORK/davical-left" \
    LOADMIX_REAL_DAVICAL_LOG="$LOG_ON" LOADMIX_REAL_DAVICAL_TEAM_ACCOUNTS="$WORK/davical-team-accounts" \
    LOADMIX_REAL_DAVICAL_TEAM_LEFT="$WORK/davical-team-left" real_checks davical::
echo "== 6b. DAViCal's scheduling, by caldav-server-tester"
# Two of the team accounts. DAViCal 1.1.12 gives no Schedule-Tag, and so the check of
# its stability is not reached: what is expected below.
caldav_venv
scheduling_features "$URL_ON/" team-1 team-2 "$PASSWORD" "$WORK/davical-scheduling" \
    || fail "caldav-server-tester did not run against DAViCal"
cat "$WORK/davical-scheduling"
printf '%s\tfull\n' scheduling scheduling.auto-schedule scheduling.calendar-user-address-set \
    scheduling.calendar-user-address-set.populated scheduling.freebusy-query scheduling.mailbox \
    scheduling.mailbox.inbox-delivery >"$WORK/davical-scheduling-expected"
printf 'scheduling.schedule-tag\tunsupported\n' >>"$WORK/davical-scheduling-expected"
diff "$WORK/davical-scheduling-expected" "$WORK/davical-scheduling" \
    || { cat "$WORK/davical-scheduling.log"; fail "DAViCal's scheduling is not what it was (above: expected, found)"; }
examples/davical-postgres/stop.sh "$WORK/davical"
echo "== 7. the recipes examples/davical-postgres and examples/tomcat-jvm, briefly"
LOADMIX_BIN="$BIN" examples/davical-postgres/run.sh "$WORK/recipe" 2 3s >"$WORK/recipe.txt" 2>&1 \
    || { cat "$WORK/recipe.txt"; fail "the DAViCal recipe failed"; }
LOADMIX_BIN="$BIN" examples/tomcat-jvm/run.sh "$WORK/tomcat" 2 3s >"$WORK/tomcat.txt" 2>&1 \
    || { cat "$WORK/tomcat.txt"; fail "the Tomcat recipe failed"; }
LOADMIX_REAL_DAVICAL_RECIPE="$WORK/recipe" LOADMIX_REAL_TOMCAT_RECIPE="$WORK/tomcat" real_checks recipes::servers::
echo "== servers_check: all passed"
