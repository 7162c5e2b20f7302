#!/usr/bin/env bash
# The Kubernetes manifests (deploy/kubernetes), checked without a cluster:
#   1. every manifest validates against Kubernetes' schemas (PyPI's kubernetes-validate,
#      offline, --strict: no unknown field);
#   2. tests/real/kubernetes.rs, handed `loadmix serve` in a process of its own, runs the
#      shard Job's exact command as N local processes and the merge Job's after them, and
#      holds the merged report against what the server counted.
# Installs kubernetes-validate into .tools/venv-k8s when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.tools/venv-k8s
if [ ! -x "$VENV/bin/kubernetes-validate" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate
fi
BIN=${CARGO_TARGET_DIR:-target}/debug/loadmix
[ -x "$BIN" ] || cargo build --locked
echo "== 1. manifests against Kubernetes' schemas"
"$VENV/bin/kubernetes-validate" --strict --quiet deploy/kubernetes/*.yaml
echo "   $(ls deploy/kubernetes/*.yaml | wc -l) files valid"

WORK=$(mktemp -d)
SERVE=
cleanup() { [ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
PORT=$(free_port)
"$BIN" serve --bind "127.0.0.1:$PORT" --no-auth >"$WORK/serve.log" 2>&1 &
SERVE=$!
wait_port "$PORT" serve "$WORK/serve.log"
echo "== 2. the Jobs' commands as local processes, the merged report against the server's count"
LOADMIX_REAL_K8S_SERVER="http://127.0.0.1:$PORT/cosmo" real_checks kubernetes::
echo "== k8s_check: all passed"
