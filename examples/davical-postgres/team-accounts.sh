#!/usr/bin/env bash
# Accounts team-1 .. team-N in one DAViCal database, made as DAViCal's admin pages make
# them: a user and its principal, the password in DAViCal's plain '**' form, and what the
# pages grant a new principal ($c->default_privileges: others may read its free-busy time
# and deliver scheduling messages to it, bits 512 | 7168; without it an invitation is
# refused delivery, SCHEDULE-STATUS 3.8). They grant no access to calendars: a team
# shares by ACL alone. Their names, one a line, go to OUT (for accounts.file).
#
# Usage: examples/davical-postgres/team-accounts.sh PGSOCK PGPORT N OUT   (password: $LOADMIX_PASSWORD)
set -euo pipefail
SOCK=$1 PORT=$2 N=$3 OUT=$4
: "${LOADMIX_PASSWORD:?give the password of the accounts}"
psql -h "$SOCK" -p "$PORT" -U postgres -qAt -v pw="**$LOADMIX_PASSWORD" -v n="$N" davical <<'SQL' >/dev/null
INSERT INTO usr (active, email_ok, updated, username, password, fullname, email)
  SELECT TRUE, current_date, current_date, 'team-' || i, :'pw', 'Team ' || i,
         'team-' || i || '@loadmix.invalid'
  FROM generate_series(1, :n) AS i;
INSERT INTO principal (type_id, user_no, displayname, default_privileges)
  SELECT 1, user_no, fullname, (512 | 7168)::BIT(24) FROM usr WHERE username LIKE 'team-%';
SQL
seq -f 'team-%g' 1 "$N" >"$OUT"
