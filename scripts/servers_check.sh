#!/usr/bin/env bash
# loadmix against the kind of servers users own, started here on loopback from Debian and
# PyPI packages (installed when missing). Fails, never skips, when one cannot be started.
#
#   1. nginx terminating TLS in front of Radicale (certificate made here with
#      `loadmix cert`): caldav-sync.yaml over https with --ca-cert, 0 failures; with
#      another CA the run stops at preflight, exit 3, naming the unknown issuer.
#   2. nginx's WebDAV modules with Basic auth: webdav.yaml, 0 failures, no 404 on a
#      delete, the share empty afterwards, and the report's requests equal to what nginx
#      logged (cleanup included).
#   3. Apache's mod_dav with Digest auth: webdav.yaml, 0 failures, one 401 per user.
#   4. The embedded server over https (`loadmix serve --tls-cert/--tls-key`): the Cosmo
#      workload, 0 failures.
#   5. Other people's data: Radicale pre-filled with a calendar and events of its own; every
#      CalDAV workload runs against the same account; the pre-filled files are
#      byte-for-byte unchanged afterwards, and nothing the runs made is left.
#   6. DAViCal on PostgreSQL (Apache, mod_php): caldav-sync.yaml with nothing but
#      --target .../caldav.php and --user, 0 failures, nothing left behind.
#   7. The recipe examples/davical-postgres (synchronous_commit on vs off), briefly: both
#      configurations compared, PostgreSQL's and Apache's CPU per operation filled in,
#      each cluster's commits scraped from its own prometheus-postgres-exporter.
#   8. The recipe examples/tomcat-jvm (two Tomcat 10 WebDAV servers, small heap + SerialGC
#      vs large heap + ParallelGC), briefly: 0 failures, each JVM watched by PID for its
#      own target, its collections and heap read from its perf data and compared.
set -euo pipefail
cd "$(dirname "$0")/.."

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
if [ ! -x .tools/venv-radicale/bin/radicale ]; then
    python3 -m venv .tools/venv-radicale
    .tools/venv-radicale/bin/pip install --quiet --disable-pip-version-check radicale
fi
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
# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh
fail() { echo "servers_check: $*"; exit 1; }
# Field `$2` of run.json `$1` (a Python expression over `r`).
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

PASSWORD='s3cr3t pa:ss$'
export LOADMIX_PASSWORD="$PASSWORD"
"$BIN" cert --out "$WORK/certs" --name 127.0.0.1 --name localhost 2>/dev/null
"$BIN" cert --out "$WORK/other-ca" --name 127.0.0.1 2>/dev/null

# --- Radicale (htpasswd auth, plain) behind nginx (TLS), nginx WebDAV (Basic) ---------
RPORT=$(free_port); TPORT=$(free_port); WPORT=$(free_port)
printf 'loadmix:%s\n' "$(openssl passwd -apr1 "$PASSWORD")" >"$WORK/htpasswd"
cat >"$WORK/radicale.conf" <<CONF
[server]
hosts = 127.0.0.1:$RPORT
[auth]
type = htpasswd
htpasswd_filename = $WORK/htpasswd
htpasswd_encryption = autodetect
[storage]
filesystem_folder = $WORK/radicale-data
[logging]
level = warning
CONF
.tools/venv-radicale/bin/radicale -C "$WORK/radicale.conf" >"$WORK/radicale.log" 2>&1 &
PIDS+=($!)
mkdir -p "$WORK/dav" "$WORK/nginx-tmp"
cat >"$WORK/nginx.conf" <<CONF
load_module /usr/lib/nginx/modules/ngx_http_dav_ext_module.so;
user root;
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 1024; }
http {
  log_format plain '\$request_method \$status';
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

echo "== 1. caldav-sync.yaml over https (nginx TLS in front of Radicale)"
"$BIN" run workloads/caldav-sync.yaml --target "https://127.0.0.1:$TPORT" --user loadmix \
    --ca-cert "$WORK/certs/ca.pem" --duration 4s --rounds 1 --quiet --out "$WORK/tls" \
    >"$WORK/tls.txt" 2>&1 || { cat "$WORK/tls.txt"; fail "caldav-sync over https failed"; }
[ "$(field "$WORK/tls/run.json" "r['summary']['total']['failures']")" = 0 ] || { cat "$WORK/tls.txt"; fail "failures over https"; }
[ "$(field "$WORK/tls/run.json" "r['tls']['verified']")" = True ] || fail "the report does not say the certificate was verified"
python3 - "$WORK/tls/run.json" "$WORK/tls-access.log" <<'PY'
import collections, json, sys
r = json.load(open(sys.argv[1]))
logged = sum(collections.Counter(l.split()[1] for l in open(sys.argv[2])).values())
ops = r["summary"]["ops"]
measured = sum(sum(o["status"].values()) + sum(a.get("count", 0) for a in o.get("answers", [])) for o in ops)
warmup = sum(x["warmup_requests"] for x in r["rounds"])
setup = r.get("preflight", {}).get("requests", 0) + sum(x.get("setup", {}).get("requests", 0) for x in r["rounds"])
cleanup = sum(x["cleanup"]["requests"] for x in r["rounds"])
if measured + warmup + setup + cleanup != logged:
    print(f"over https: measured {measured} + warm-up {warmup} + set-up {setup} + cleanup {cleanup} != nginx logged {logged}")
    sys.exit(1)
print(f"   0 failures; measured {measured} + warm-up {warmup} + set-up {setup} + cleanup {cleanup} = nginx's {logged}")
PY
set +e
"$BIN" run workloads/caldav-sync.yaml --target "https://127.0.0.1:$TPORT" --user loadmix \
    --ca-cert "$WORK/other-ca/ca.pem" --duration 2s --rounds 1 --quiet --out "$WORK/wrong-ca" >"$WORK/wrong-ca.txt" 2>&1
code=$?
set -e
[ "$code" = 3 ] || { cat "$WORK/wrong-ca.txt"; fail "a wrong CA should exit 3, got $code"; }
grep -q "unknown issuer" "$WORK/wrong-ca.txt" || { cat "$WORK/wrong-ca.txt"; fail "the wrong CA is not named"; }
echo "   wrong CA: exit 3, unknown issuer"

echo "== 2. webdav.yaml against nginx WebDAV (Basic)"
"$BIN" run workloads/webdav.yaml --target "http://127.0.0.1:$WPORT/dav" --user loadmix \
    --set run.warmup=0s --duration 4s --rounds 2 --quiet --out "$WORK/nginx-dav" >"$WORK/nginx-dav.txt" 2>&1 \
    || { cat "$WORK/nginx-dav.txt"; fail "webdav.yaml against nginx failed"; }
python3 - "$WORK/nginx-dav/run.json" "$WORK/dav-access.log" "$WORK/dav" <<'PY'
import collections, json, os, sys
r = json.load(open(sys.argv[1]))
t = r["summary"]["total"]
problems = []
if t["failures"]:
    problems.append(f"{t['failures']} failures: {r['failures'][:3]}")
logged = collections.Counter(l.split()[1] for l in open(sys.argv[2]))
if logged.get("404"):
    problems.append(f"{logged['404']} requests answered 404")
reported = sum(sum(o["status"].values()) for o in r["summary"]["ops"])
cleanup = sum(x["cleanup"]["requests"] for x in r["rounds"])
if reported + cleanup != sum(logged.values()):
    problems.append(f"report {reported} + cleanup {cleanup} != nginx logged {sum(logged.values())}")
left = os.listdir(sys.argv[3])
if left:
    problems.append(f"{len(left)} files left on the share")
if problems:
    print("nginx WebDAV: " + "; ".join(problems)); sys.exit(1)
print(f"   {reported} answers in the report + {cleanup} cleanup = nginx's {sum(logged.values())}, no 404, share empty")
PY

echo "== 3. webdav.yaml against Apache mod_dav (Digest)"
APORT=$(free_port)
mkdir -p "$WORK/apache/dav"
python3 - "$WORK/apache/digest" "$PASSWORD" <<'PY'
import hashlib, sys
ha1 = hashlib.md5(f"loadmix:dav:{sys.argv[2]}".encode()).hexdigest()
open(sys.argv[1], "w").write(f"loadmix:dav:{ha1}\n")
PY
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
"$BIN" run workloads/webdav.yaml --target "http://127.0.0.1:$APORT/dav" --user loadmix \
    --set run.warmup=0s --duration 4s --rounds 1 --quiet --out "$WORK/apache-dav" >"$WORK/apache-dav.txt" 2>&1 \
    || { cat "$WORK/apache-dav.txt"; fail "webdav.yaml against Apache failed"; }
python3 - "$WORK/apache-dav/run.json" "$WORK/apache/access.log" <<'PY'
import collections, json, sys
r = json.load(open(sys.argv[1]))
t = r["summary"]["total"]
logged = collections.Counter(l.split()[1] for l in open(sys.argv[2]))
problems = []
if t["failures"]:
    problems.append(f"{t['failures']} failures: {r['failures'][:3]}")
users = r["workload"]["classes"][0]["count"]
reported_401 = t["status"].get("401", 0)
if logged.get("401", 0) > users * 2 or reported_401 == 0:
    problems.append(f"Digest: Apache answered 401 {logged.get('401', 0)} times, the report says {reported_401}, for {users} users")
if logged.get("404"):
    problems.append(f"{logged['404']} requests answered 404")
if problems:
    print("Apache Digest: " + "; ".join(problems)); sys.exit(1)
print(f"   {t['requests']} requests, 0 failures, {logged.get('401', 0)} Digest challenges for {users} users")
PY

echo "== 4. the embedded server over https (Cosmo workload)"
EPORT=$(free_port)
"$BIN" serve --bind "127.0.0.1:$EPORT" --tls-cert "$WORK/certs/cert.pem" --tls-key "$WORK/certs/key.pem" >"$WORK/serve.log" 2>&1 &
PIDS+=($!)
wait_port "$EPORT" serve "$WORK/serve.log"
"$BIN" run workloads/cosmo-0.7.yaml --target "https://127.0.0.1:$EPORT/cosmo" --ca-cert "$WORK/certs/ca.pem" \
    --set run.warmup=0s --duration 4s --rounds 1 --quiet --out "$WORK/cosmo-https" >"$WORK/cosmo-https.txt" 2>&1 \
    || { cat "$WORK/cosmo-https.txt"; fail "the Cosmo workload over https failed"; }
[ "$(field "$WORK/cosmo-https/run.json" "r['summary']['total']['failures']")" = 0 ] || { cat "$WORK/cosmo-https.txt"; fail "failures over https"; }
# The 2007 client opened a connection per request: each has its handshake, most resumed.
echo "   0 failures, $(field "$WORK/cosmo-https/run.json" "r['summary']['total']['requests']") requests, TLS handshake p50 $(field "$WORK/cosmo-https/run.json" "r['summary']['total']['tls_handshake_ms']['p50']") ms, $(field "$WORK/cosmo-https/run.json" "r['summary']['total']['tls_resumed']") resumed"

echo "== 5. other people's data on Radicale is never touched"
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
snapshot() { (cd "$WORK/radicale-data/collection-root/loadmix" && find precious -type f -print0 | sort -z | xargs -0 sha256sum); }
before=$(snapshot)
for wl in caldav-sync caldav-saturate; do
    "$BIN" run "workloads/$wl.yaml" --target "http://127.0.0.1:$RPORT" --user loadmix \
        --set run.warmup=0s --duration 3s --rounds 1 --quiet --out "$WORK/foreign-$wl" >"$WORK/foreign-$wl.txt" 2>&1 \
        || { cat "$WORK/foreign-$wl.txt"; fail "$wl against the pre-filled Radicale failed"; }
done
after=$(snapshot)
[ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after"); fail "the pre-filled calendar changed"; }
left=$(find "$WORK/radicale-data/collection-root/loadmix" -mindepth 1 -maxdepth 1 -type d ! -name precious ! -name '.Radicale*' | wc -l)
[ "$left" = 0 ] || { ls "$WORK/radicale-data/collection-root/loadmix"; fail "$left calendar(s) the runs made are left"; }
echo "   the pre-filled calendar is byte-for-byte unchanged; nothing the runs made is left"
echo "== 6. DAViCal on PostgreSQL: only the URL and a user"
# The recipe's own set-up (examples/davical-postgres): its first server is enough here.
# PostgreSQL runs as its own user, which must reach the folder.
chmod 755 "$WORK"
examples/davical-postgres/setup.sh "$WORK/davical" >"$WORK/davical-setup.log" 2>&1 \
    || { cat "$WORK/davical-setup.log" "$WORK"/davical/*/*.log 2>/dev/null; fail "DAViCal could not be set up"; }
# shellcheck disable=SC1091
. "$WORK/davical/targets.env"
"$BIN" run workloads/caldav-sync.yaml --target "$URL_ON" --user admin \
    --duration 4s --rounds 1 --quiet --out "$WORK/davical-run" >"$WORK/davical-run.txt" 2>&1 \
    || { cat "$WORK/davical-run.txt" "$WORK/davical/on/apache/error.log"; fail "caldav-sync.yaml against DAViCal failed"; }
python3 - "$WORK/davical-run/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["summary"]["total"]
c = r["rounds"][0]["cleanup"]
if t["failures"] or c["failures"] or t["requests"] == 0:
    print(f"DAViCal: {t['failures']} failures {r['failures'][:3]}, cleanup {c}"); sys.exit(1)
print(f"   {t['requests']} requests, 0 failures, {c['requests']} calendars deleted after the round")
PY
left=$(psql -h "$PGSOCK_ON" -p "$PGPORT_ON" -U postgres -qAt -c "SELECT count(*) FROM collection WHERE dav_name LIKE '/admin/lm-%'" davical)
[ "$left" = 0 ] || fail "$left calendar(s) the run made are left in DAViCal"
examples/davical-postgres/stop.sh "$WORK/davical"
echo "== 7. examples/davical-postgres, briefly"
LOADMIX_BIN="$BIN" examples/davical-postgres/run.sh "$WORK/recipe" 2 3s >"$WORK/recipe.txt" 2>&1 \
    || { cat "$WORK/recipe.txt"; fail "the DAViCal recipe failed"; }
python3 - "$WORK/recipe" <<'PY'
import json, sys
problems = []
for variant in ["sync-on", "sync-off"]:
    r = json.load(open(f"{sys.argv[1]}/{variant}/run.json"))
    t = r["summary"]["total"]
    if t["failures"] or not t["successes"]:
        problems.append(f"{variant}: {t['failures']} failures of {t['requests']}")
    server = {p["process"]: p for p in r["summary"].get("server", [])}
    for name in ["postgres", "apache2"]:
        p = server.get(name)
        if not p or p["cpu_ms_per_op"] <= 0 or p["rss_peak_mib"] <= 0 or p.get("problem"):
            problems.append(f"{variant}: server column {name} not filled: {p}")
    if len(r.get("warmup_rounds", [])) != 1 or r.get("order") != "balanced":
        problems.append(f"{variant}: warm-up rounds {r.get('warmup_rounds')} order {r.get('order')}")
    series = {m["series"]: m for m in r["summary"].get("metrics", [])}
    commits = series.get("pg_stat_database_xact_commit")
    if not commits or commits.get("problem") or commits["per_1000_ops"] <= 0:
        problems.append(f"{variant}: its own exporter's commits not scraped: {commits}")
compare = open(f"{sys.argv[1]}/compare.txt").read()
for row in ["CPU postgres (ms/op)", "pg_stat_database_xact_commit (per 1,000 ops)"]:
    if row not in compare:
        problems.append(f"compare.txt lacks {row}")
if problems:
    print("DAViCal recipe: " + "; ".join(problems)); sys.exit(1)
print("   both configurations compared; postgres and apache2 CPU per operation and each cluster's commits filled in")
PY
echo "== 8. examples/tomcat-jvm, briefly"
LOADMIX_BIN="$BIN" examples/tomcat-jvm/run.sh "$WORK/tomcat" 2 3s >"$WORK/tomcat.txt" 2>&1 \
    || { cat "$WORK/tomcat.txt"; fail "the Tomcat recipe failed"; }
python3 - "$WORK/tomcat" <<'PY'
import json, sys
problems = []
for variant in ["small", "large"]:
    r = json.load(open(f"{sys.argv[1]}/{variant}/run.json"))
    t = r["summary"]["total"]
    if t["failures"] or not t["successes"]:
        problems.append(f"{variant}: {t['failures']} failures of {t['requests']}: {r['failures'][:3]}")
    if any(x["cleanup"]["failures"] for x in r["rounds"]):
        problems.append(f"{variant}: cleanup failed")
    server = r["summary"].get("server", [])
    if len(server) != 1 or server[0]["process"] != "java":
        problems.append(f"{variant}: one JVM watched, as 'java': {[p['process'] for p in server]}")
        continue
    p = server[0]
    jvm = p.get("jvm") or {}
    if p["cpu_ms_per_op"] <= 0 or p.get("problem") or jvm.get("heap_used_peak_mib", 0) <= 0 or not jvm.get("collectors"):
        problems.append(f"{variant}: JVM figures not filled: {p}")
small = json.load(open(f"{sys.argv[1]}/small/run.json"))["summary"]["server"][0]["jvm"]
if small["gc_count"] == 0:
    problems.append("the 64 MiB SerialGC JVM collected nothing under 64 KiB uploads")
compare = open(f"{sys.argv[1]}/compare.txt").read()
for row in ["CPU java (ms/op)", "GC time java", "heap peak java"]:
    if row not in compare:
        problems.append(f"compare.txt lacks {row}")
if problems:
    print("Tomcat recipe: " + "; ".join(problems)); sys.exit(1)
print(f"   both JVMs compared; the small one collected {small['gc_count']} times ({small['gc_time_ms']:.0f} ms)")
PY
echo "== servers_check: all passed"
