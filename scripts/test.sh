#!/usr/bin/env bash
# The whole test suite, from a fresh checkout: formatting, lints, unit and integration
# tests. Installs what the tests need (nothing beyond the Rust toolchain yet) under
# .tools/ (git-ignored). CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --all-targets --locked -- -D warnings

echo "== cargo test"
# The binary is built first so the tests that spawn it do not race its build.
cargo build --locked
cargo test --locked --all-targets

echo "== all tests passed"
