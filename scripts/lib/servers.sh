# What the scripts that start servers share (the checks, recipes and benches): sourced,
# not run.
#   free_port                 a TCP port on 127.0.0.1 that nothing listens on now
#   wait_port PORT [NAME [LOG]]
#                             wait (up to $WAIT_PORT_SECONDS, 60 by default) until
#                             something accepts on PORT; else say so, print the tail of
#                             LOG when given, and fail
#   real_checks FILTER        the Rust checks of tests/real/ whose names hold FILTER,
#                             one at a time (they share the server they are handed
#                             through LOADMIX_REAL_* variables), their figures printed
#   pypi_venv NAME            a server from PyPI (radicale, xandikos) in
#                             .tools/venv-NAME, installed when missing
#   radicale_open_conf FILE PORT DATA
#                             a Radicale configuration: loopback PORT, collections in
#                             DATA, no authentication
#   radicale_scratch          for a Radicale loadmix starts (the recipes): installs it
#                             when missing and sets WORK (a scratch folder, removed on
#                             exit), PORT (free) and RADICALE_START (the --start command)
#   caldav_venv               the Python caldav library, caldav-server-tester and
#                             vdirsyncer (a CardDAV client) in .tools/venv-caldav,
#                             installed when missing
#   scheduling_features URL ORGANIZER ATTENDEE PASSWORD OUT
#                             caldav-server-tester's RFC 6638 checks against the CalDAV
#                             root URL with two accounts (one password, from a file the
#                             tester reads, never a command line); OUT gets one line
#                             per scheduling feature it reports: its name and level

free_port() {
    local port
    # Below Linux's ephemeral range (32768-60999), so no client socket holds it.
    for _ in $(seq 1 200); do
        port=$((20000 + RANDOM % 12000))
        if ! (: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    echo "no free port on 127.0.0.1" >&2
    return 1
}

wait_port() {
    local port=$1 name=${2:-something} log=${3:-}
    local tries=$(( ${WAIT_PORT_SECONDS:-60} * 10 ))
    for _ in $(seq 1 "$tries"); do
        # Connect and close without writing a byte: a server that logs what it reads
        # (nginx logs a stray newline on its TLS port as a 400) sees no request.
        (: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "$name did not start on port $port" >&2
    if [ -n "$log" ] && [ -f "$log" ]; then
        tail -30 "$log" >&2
    fi
    return 1
}

real_checks() {
    cargo test --locked --test real -- --ignored --test-threads=1 --nocapture "$1"
}

# A server from PyPI in a venv of its own, .tools/venv-NAME (installed when missing).
pypi_venv() {
    local name=$1
    if [ ! -x ".tools/venv-$name/bin/$name" ]; then
        echo "installing $name into .tools/venv-$name"
        python3 -m venv ".tools/venv-$name"
        ".tools/venv-$name/bin/pip" install --quiet --disable-pip-version-check "$name"
    fi
}

# A Radicale configuration at FILE: loopback PORT, collections in DATA, no authentication.
radicale_open_conf() {
    local file=$1 port=$2 data=$3
    cat >"$file" <<CONF
[server]
hosts = 127.0.0.1:$port
[auth]
type = none
[storage]
filesystem_folder = $data
[logging]
level = warning
CONF
}

radicale_scratch() {
    pypi_venv radicale
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    PORT=$(free_port)
    radicale_open_conf "$WORK/radicale.conf" "$PORT" "$WORK/data"
    RADICALE_START="exec $PWD/.tools/venv-radicale/bin/radicale -C $WORK/radicale.conf"
}

CALDAV_VENV=.tools/venv-caldav

caldav_venv() {
    if [ ! -x "$CALDAV_VENV/bin/caldav-server-tester" ] || [ ! -x "$CALDAV_VENV/bin/vdirsyncer" ] \
        || ! "$CALDAV_VENV/bin/python" -c "import caldav" 2>/dev/null; then
        echo "installing the caldav client library, caldav-server-tester and vdirsyncer into $CALDAV_VENV"
        python3 -m venv "$CALDAV_VENV"
        "$CALDAV_VENV/bin/pip" install --quiet --disable-pip-version-check caldav caldav-server-tester vdirsyncer
    fi
}

scheduling_features() {
    local url=$1 organizer=$2 attendee=$3 password=$4 out=$5 conf checks=() c
    conf=$(mktemp)
    # The primary account's password goes in the file too: a command line is visible to
    # every process on the machine.
    URL=$url ORG=$organizer ATT=$attendee PW=$password python3 -c '
import json, os
acct = lambda u: {"caldav_url": os.environ["URL"], "caldav_username": u, "caldav_password": os.environ["PW"]}
print(json.dumps({"organizer": acct(os.environ["ORG"]), "attendee": acct(os.environ["ATT"])}))' >"$conf"
    for c in CheckScheduling CheckSchedulingDetails CheckFreeBusyQueryRFC6638 CheckScheduleTag \
        CheckSchedulingInboxDelivery CheckScheduleTagStablePartstat; do
        checks+=(--run-checks "$c")
    done
    if ! CALDAV_CONFIG_FILE="$conf" "$CALDAV_VENV/bin/caldav-server-tester" --verbose \
        --config-section organizer --config-section attendee "${checks[@]}" >"$out.log" 2>&1; then
        rm -f "$conf"
        cat "$out.log"
        return 1
    fi
    rm -f "$conf"
    grep -A1 '^## scheduling' "$out.log" | grep -v '^--$' | paste - - \
        | sed 's/^## //; s/\tFeature support level found: /\t/' >"$out"
}
