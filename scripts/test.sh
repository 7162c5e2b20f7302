#!/usr/bin/env bash
# The whole test suite, from a fresh checkout: formatting, lints, unit and integration
# tests, a real CalDAV client (the Python `caldav` library), caldav-server-tester's
# scheduling checks and vdirsyncer (CardDAV) against the embedded server on both stores,
# the CalDAV and CardDAV drivers against real servers (Radicale, Xandikos, Cyrus), and
# https, Digest, WebDAV and other people's data against nginx, Apache and Radicale, the
# two recipes (DAViCal on PostgreSQL, Tomcat), the message brokers ActiveMQ and RabbitMQ
# over STOMP with their own counts, a run watched live (its metrics in a real Prometheus,
# its dashboard in Chromium), and the Kubernetes manifests. The Python packages (caldav,
# caldav-server-tester, vdirsyncer, radicale, xandikos, kubernetes-validate) are
# installed in venvs under .tools/ (git-ignored); Debian's nginx,
# libnginx-mod-http-dav-ext, apache2, davical, postgresql, libapache2-mod-php,
# prometheus-postgres-exporter, tomcat10, activemq, rabbitmq-server, cyrus-imapd,
# cyrus-caldav, cyrus-admin, sasl2-bin, prometheus and chromium, npm's playwright-core,
# and crates.io's mdbook, when missing. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test"
# The binary is built first so the tests that spawn it do not race its build.
cargo build --locked
cargo test --locked --workspace --all-targets

echo "== real CalDAV client (Python caldav) and caldav-server-tester's scheduling checks against loadmix serve"
scripts/caldav_client_check.sh

echo "== caldav-sync.yaml against real CalDAV servers (Radicale, Xandikos)"
scripts/peers_check.sh

echo "== Cyrus IMAP (CalDAV and CardDAV) as a staging server, counted against its telemetry"
scripts/cyrus_check.sh

echo "== real servers: nginx TLS + Radicale, nginx WebDAV, Apache Digest, embedded https, DAViCal, Tomcat"
scripts/servers_check.sh

echo "== message brokers over STOMP: ActiveMQ (KahaDB) and RabbitMQ, counts against their own"
scripts/brokers_check.sh

echo "== HTML pages in headless Chromium"
scripts/html_check.sh

echo "== watching a run live: a real Prometheus scrapes --metrics, --dashboard in headless Chromium"
scripts/live_check.sh

echo "== the book (docs/): mdBook builds it"
scripts/docs_check.sh

echo "== Kubernetes manifests: schemas, and the Jobs' commands run locally and merged"
scripts/k8s_check.sh

echo "== all tests passed"
