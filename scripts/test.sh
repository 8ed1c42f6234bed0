#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs the pinned Claude Code
# (the real CLI the end-to-end tests drive against a loopback stand-in) and
# the system tools the tests use, then checks formatting and lints, runs
# every test and builds the benches. A test never skips because a tool is
# missing: it fails saying what is missing, so this script installs them.
set -euo pipefail
cd "$(dirname "$0")/.."

CLAUDE_VERSION="${CLAUDE_VERSION:-2.1.328}"
tools=".tools/claude"
installed="$tools/node_modules/@anthropic-ai/claude-code/package.json"
if ! grep -q "\"version\": \"$CLAUDE_VERSION\"" "$installed" 2>/dev/null; then
  echo "installing @anthropic-ai/claude-code@$CLAUDE_VERSION into $tools" >&2
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-audit --no-fund --no-save --loglevel=error \
    "@anthropic-ai/claude-code@$CLAUDE_VERSION" >&2
fi

# Tools the tests run, and the Debian package of each: man (the man pages
# render), zsh and fish (their completion scripts parse), script (a pseudo
# terminal for the spinner and colour checks), unshare (a read-only mount
# for the read-only store test), openssl (the test PostgreSQL server's TLS
# certificate).
missing=()
for pair in man:man-db zsh:zsh fish:fish script:bsdutils unshare:util-linux openssl:openssl; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${missing[*]}" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  else
    echo "the tests need these packages: ${missing[*]} (Debian: apt-get install ${missing[*]})" >&2
    exit 1
  fi
fi

export DUDUCLAW_TEST_CLAUDE="$PWD/$tools/node_modules/.bin/claude"
"$DUDUCLAW_TEST_CLAUDE" --version >&2

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo bench --workspace --no-run
log=$(mktemp)
# A throwaway PostgreSQL server for the store tests on a server (see
# scripts/pg.sh); they read its URL from DUDUCLAW_TEST_PG_URL and fail,
# never skip, without it. Stopped and removed on exit, whatever happens.
pgdir=$(mktemp -d)
trap 'scripts/pg.sh stop "$pgdir/data" || true; rm -rf "$pgdir"; rm -f "$log"' EXIT
if ! DUDUCLAW_TEST_PG_URL=$(scripts/pg.sh start "$pgdir/data"); then
  echo "scripts/test.sh: could not start the test PostgreSQL server (scripts/pg.sh start, message above)" >&2
  exit 1
fi
export DUDUCLAW_TEST_PG_URL
# The CA that signed the test server's TLS certificate (see scripts/pg.sh).
export DUDUCLAW_TEST_PG_CA="$pgdir/data/ca.pem"
cargo test --workspace 2>&1 | tee "$log"
# One closing line over every test binary (cargo prints one per binary,
# the last ones being doc-test runs with nothing in them).
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
