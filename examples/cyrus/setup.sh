#!/usr/bin/env bash
# A scratch Cyrus IMAP instance (Debian's cyrus-imapd with cyrus-caldav: CalDAV and
# CardDAV) on loopback, every file of it under FOLDER, owned by the `cyrus` user:
#
#   examples/cyrus/setup.sh FOLDER HTTP_PORT [IMAP_PORT] [USER...]
#
# Installs the packages when they are missing (needs root), writes FOLDER/imapd.conf and
# FOLDER/cyrus.conf, gives each USER (default: loadmix) and the admin `cyrus` the password
# in FOLDER/password (made up when the file does not exist; never on a command line),
# starts the master process in the background (its PID in FOLDER/conf/master.pid) and makes
# each user's mailbox over IMAP, which is what gives a user its DAV home
# (/dav/calendars/user/NAME/, /dav/addressbooks/user/NAME/).
#
# Every request of a user is written to Cyrus's own telemetry log of that user,
# FOLDER/conf/log/NAME/, a file per server process, the protocol as it went: that is the
# log loadmix's counts are held against. CYRUS_SPOOL, when set, is where the mailboxes
# (every contact and event) are kept instead of FOLDER/spool: the storage a comparison
# varies (examples/cyrus/run.sh).
set -euo pipefail
FOLDER=${1:?usage: setup.sh FOLDER HTTP_PORT [IMAP_PORT] [USER...]}
HTTP_PORT=${2:?usage: setup.sh FOLDER HTTP_PORT [IMAP_PORT] [USER...]}
IMAP_PORT=${3:-$((HTTP_PORT + 1))}
shift $(( $# >= 3 ? 3 : $# ))
USERS=("$@")
[ ${#USERS[@]} -gt 0 ] || USERS=(loadmix)

if [ ! -x /usr/lib/cyrus/bin/httpd ] || ! command -v saslpasswd2 >/dev/null; then
    echo "installing cyrus-imapd, cyrus-caldav, sasl2-bin"
    need=(cyrus-imapd cyrus-caldav cyrus-admin sasl2-bin)
    export DEBIAN_FRONTEND=noninteractive
    (apt-get install -y -qq "${need[@]}" || (apt-get update -qq && apt-get install -y -qq "${need[@]}")) >/dev/null
fi

mkdir -p "$FOLDER"
FOLDER=$(cd "$FOLDER" && pwd)
if [ ! -s "$FOLDER/password" ]; then
    head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$FOLDER/password"
fi
chmod 600 "$FOLDER/password"
for d in conf conf/log conf/proc conf/lock conf/socket conf/sieve; do
    mkdir -p "$FOLDER/$d"
done
SPOOL=${CYRUS_SPOOL:-$FOLDER/spool}
mkdir -p "$SPOOL"
for u in "${USERS[@]}"; do mkdir -p "$FOLDER/conf/log/$u"; done

cat >"$FOLDER/imapd.conf" <<CONF
configdirectory: $FOLDER/conf
defaultpartition: default
partition-default: $SPOOL
proc_path: $FOLDER/conf/proc
mboxname_lockpath: $FOLDER/conf/lock
sievedir: $FOLDER/conf/sieve
lmtpsocket: $FOLDER/conf/socket/lmtp
idlesocket: $FOLDER/conf/socket/idle
notifysocket: $FOLDER/conf/socket/notify
httpmodules: caldav carddav
allowplaintext: yes
sasl_pwcheck_method: auxprop
sasl_auxprop_plugin: sasldb
sasl_sasldb_path: $FOLDER/conf/sasldb2
sasl_mech_list: PLAIN LOGIN
admins: cyrus
unixhierarchysep: yes
caldav_allowscheduling: on
CONF

cat >"$FOLDER/cyrus.conf" <<CONF
START {
  recover cmd="/usr/lib/cyrus/bin/ctl_cyrusdb -r -C $FOLDER/imapd.conf"
}
SERVICES {
  imap cmd="/usr/lib/cyrus/bin/imapd -C $FOLDER/imapd.conf" listen="127.0.0.1:$IMAP_PORT" prefork=0
  http cmd="/usr/lib/cyrus/bin/httpd -C $FOLDER/imapd.conf" listen="127.0.0.1:$HTTP_PORT" prefork=1
}
EVENTS {
}
CONF

PW=$(cat "$FOLDER/password")
for u in cyrus "${USERS[@]}"; do
    printf '%s' "$PW" | saslpasswd2 -p -c -f "$FOLDER/conf/sasldb2" "$u"
done
chown -R cyrus:mail "$FOLDER/conf" "$SPOOL" "$FOLDER/imapd.conf" "$FOLDER/cyrus.conf"
chmod 640 "$FOLDER/conf/sasldb2"

su -s /bin/sh cyrus -c "/usr/sbin/cyrmaster -C '$FOLDER/imapd.conf' -M '$FOLDER/cyrus.conf' -D -p '$FOLDER/conf/master.pid'" \
    >"$FOLDER/master.log" 2>&1 &
# The master writes its PID once it runs; the ports answer once its services listen.
for _ in $(seq 1 600); do
    if [ -s "$FOLDER/conf/master.pid" ] && (: <"/dev/tcp/127.0.0.1/$IMAP_PORT") 2>/dev/null \
        && (: <"/dev/tcp/127.0.0.1/$HTTP_PORT") 2>/dev/null; then
        break
    fi
    sleep 0.1
done
(: <"/dev/tcp/127.0.0.1/$HTTP_PORT") 2>/dev/null || { cat "$FOLDER/master.log"; echo "Cyrus did not start"; exit 1; }

# A user's DAV home exists once the admin has made its mailbox (user/NAME: the hierarchy
# separator is /).
python3 - "$IMAP_PORT" "$FOLDER/password" "${USERS[@]}" <<'PY'
import imaplib, sys
port, pwfile, users = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
with open(pwfile) as f:
    pw = f.read().strip()
m = imaplib.IMAP4("127.0.0.1", port)
m.login("cyrus", pw)
for u in users:
    typ, data = m.create(f"user/{u}")
    if typ != "OK" and b"already exists" not in b" ".join(data).lower():
        sys.exit(f"IMAP CREATE user/{u}: {typ} {data}")
m.logout()
PY
echo "Cyrus on http://127.0.0.1:$HTTP_PORT (IMAP $IMAP_PORT), users: ${USERS[*]}; stop: kill \$(cat $FOLDER/conf/master.pid)"
