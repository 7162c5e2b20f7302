#!/usr/bin/env bash
# The book in docs/ builds with mdBook (crates.io's, installed once into .tools/mdbook);
# tests/real/book.rs checks that every chapter of SUMMARY.md became a page and that the
# README's two commands are included in its introduction as they stand. Its workload
# examples are loaded by the cargo tests (tests/it/docs.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
MDBOOK=.tools/mdbook/bin/mdbook
if [ ! -x "$MDBOOK" ]; then
    cargo install --quiet --locked mdbook --root .tools/mdbook
fi
rm -rf target/book
"$MDBOOK" build docs 2>&1 | grep -v '^\s*$' | sed 's/^/   /'
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
LOADMIX_REAL_BOOK=target/book real_checks book::
