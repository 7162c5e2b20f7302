#!/usr/bin/env bash
# The book in docs/ builds with mdBook (crates.io's, installed once into .tools/mdbook),
# every chapter of SUMMARY.md becomes a page, and the README's two commands are included
# in its introduction as they stand. Its workload examples are loaded by the cargo tests
# (tests/it/docs.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
MDBOOK=.tools/mdbook/bin/mdbook
if [ ! -x "$MDBOOK" ]; then
    cargo install --quiet --locked mdbook --root .tools/mdbook
fi
rm -rf target/book
"$MDBOOK" build docs 2>&1 | grep -v '^\s*$' | sed 's/^/   /'
python3 - <<'PY'
import pathlib, re, sys
book = pathlib.Path("target/book")
summary = pathlib.Path("docs/src/SUMMARY.md").read_text()
pages = re.findall(r"\(([a-z0-9-]+)\.md\)", summary)
missing = [p for p in pages if not (book / f"{p}.html").is_file()]
intro = (book / "introduction.html").read_text()
readme = pathlib.Path("README.md").read_text()
first = next(l for l in readme.splitlines() if l.startswith("cargo run --release -- run "))
problems = []
if missing:
    problems.append(f"pages not built: {missing}")
if first.split("#")[0].strip().replace("--", "") not in intro.replace("--", "").replace("&quot;", '"'):
    problems.append("the introduction lacks the README's first command")
if "{{#include" in intro:
    problems.append("an include was left unresolved")
if problems:
    print("docs: " + "; ".join(problems)); sys.exit(1)
print(f"   the book: {len(pages)} chapters built into target/book/, the README's commands included")
PY
