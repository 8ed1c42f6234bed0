#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs the pinned Claude Code
# (the real CLI the end-to-end tests drive against a loopback stand-in) and
# the system tools the tests use, then checks formatting and lints, checks
# the benches build, and runs every test. Plain `cargo test` ignores the
# tests that need the pinned claude or the PostgreSQL server (saying so);
# here both are provided, and a test ignored for either fails the run.
#
# CLAUDE_VERSION=latest (or a version): after the whole suite on the pinned
# Claude Code, the whole suite runs again on that version, installed beside
# the pinned one (scripts/claude.sh), to catch drift in the CLI.
# JOBS=N: how many test jobs (an executable, or a module of the
# integration tests) run at once (default 2).
# TEST_THREADS=N: tests at once within each (default 2, as many as cores).
set -euo pipefail
cd "$(dirname "$0")/.."

claude=$(scripts/claude.sh)
other_claude=
if [ -n "${CLAUDE_VERSION:-}" ]; then
  other_claude=$(scripts/claude.sh "$CLAUDE_VERSION")
  [ "$other_claude" = "$claude" ] && other_claude=
fi

# Tools the tests run, and the Debian package of each: man (the man pages
# render), zsh and fish (their completion scripts parse), script (a pseudo
# terminal for the spinner and colour checks), unshare (a read-only mount
# for the read-only store test), openssl (the test PostgreSQL server's TLS
# certificate). Only missing ones are installed, and the list is said first.
missing=()
for pair in man:man-db zsh:zsh fish:fish script:bsdutils unshare:util-linux openssl:openssl; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test.sh: the tests need these missing packages; installing them with apt-get: ${missing[*]}" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  else
    echo "the tests need these packages: ${missing[*]} (Debian: apt-get install ${missing[*]})" >&2
    exit 1
  fi
fi

"$claude" --version >&2

artifacts=$(mktemp)
scratch=$(mktemp -d)
pgdir=$(mktemp -d)
# A throwaway PostgreSQL server for the store tests on a server (see
# scripts/pg.sh), and the pinned claude for the end-to-end tests: both
# given before anything is built, since the build decides from
# DUDUCLAW_TEST_PG_URL and DUDUCLAW_TEST_CLAUDE which tests plain `cargo
# test` must ignore (build.rs). The server is stopped and removed on exit,
# whatever happens.
stop_clippy() {
  if [ -s "$scratch/clippy.pid" ] && [ ! -e "$scratch/clippy.rc" ]; then
    kill -- "-$(cat "$scratch/clippy.pid")" 2>/dev/null || true
  fi
}
trap 'stop_clippy; scripts/pg.sh stop "$pgdir/data" || true; rm -rf "$pgdir" "$scratch"; rm -f "$artifacts"' EXIT
if ! DUDUCLAW_TEST_PG_URL=$(scripts/pg.sh start "$pgdir/data"); then
  echo "scripts/test.sh: could not start the test PostgreSQL server (scripts/pg.sh start, message above)" >&2
  exit 1
fi
export DUDUCLAW_TEST_PG_URL
# The CA that signed the test server's TLS certificate (see scripts/pg.sh).
export DUDUCLAW_TEST_PG_CA="$pgdir/data/ca.pem"
export DUDUCLAW_TEST_CLAUDE=$claude

# A fresh target folder (a clean clone, CI) is built without incremental
# state: no later build here would read it, and writing it cost 16 s of the
# 109 s test build and 7 s of clippy. A developer's own target keeps it.
if [ ! -d "${CARGO_TARGET_DIR:-target}" ]; then
  export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
fi

cargo fmt --all -- --check
# Everything the tests run, and the benches in the same (test) profile: they
# must keep compiling and linking, but `cargo bench --no-run` would build
# them in the release profile with LTO, which took 5 of the 14 minutes of a
# run and gave the tests nothing. Cargo's JSON lists the test executables.
cargo test --workspace --all-targets --no-run --message-format=json-render-diagnostics >"$artifacts"

# Clippy runs beside the tests, at the lowest priority: the tests spend
# about a quarter of their time waiting (on claude, the stand-in, timers),
# and clippy's two minutes of CPU fill those gaps instead of a minute of
# their own up front. Its output comes after the tests'; a lint fails the
# run as before. (The doc tests wait for its lock on target/.)
(
  rc=0
  # In a process group of its own, so that an early exit can end it. A
  # session of its own is also a scheduling group of its own (Linux's
  # autogroup), where a nice value ranks only within the group: the
  # group's nice value is what makes clippy yield to the tests.
  setsid -w sh -c 'echo $$ >"$0"; echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 cargo clippy --workspace --all-targets -- -D warnings' \
    "$scratch/clippy.pid" >"$scratch/clippy.log" 2>&1 || rc=$?
  echo "$rc" >"$scratch/clippy.rc"
) &
clippy=$!

# The test executables (not the benches): name, path, package folder, one
# per line. The integration executable holds most of the tests; it runs as
# one job per module (its tests named exactly), so that the jobs, JOBS at a
# time, balance as 0.6's separate executables did: most of their time is
# spent waiting on claude, the stand-in and timers.
executables=$(sed -n 's/.*"manifest_path":"\([^"]*\)\/Cargo.toml".*"target":{"kind":\["\([a-z]*\)"\].*"name":"\([^"]*\)".*"profile":{[^}]*"test":true}.*"executable":"\([^"]*\)".*/\3\t\2\t\4\t\1/p' "$artifacts" |
  awk -F'\t' -v OFS='\t' '$2 != "bench" { print $1 "/" $2, $3, $4 }')
if [ -z "$executables" ]; then
  echo "scripts/test.sh: found no test executables in cargo's output" >&2
  exit 1
fi
# The jobs: name, path, folder, the tests it runs (none: all of them), the
# slowest first, the order they start in. SLOWEST lists the modules (and
# the library's unit tests) that took longest in a run of this script (the
# "it/recall: ok in 108 s" lines), the slowest first; the rest follow in any
# order, so a module missing here still runs.
SLOWEST="poison e2e hosts side_load recall jobs pin robust forget trust upgrade parity feed bill killed lib events stream_json server cli"
jobs_list() {
  local name exe dir
  while IFS=$'\t' read -r name exe dir; do
    if [ "$name" = it/test ]; then
      "$exe" --list --format terse |
        sed -n 's/: test$//p' |
        awk -F'::' -v OFS='\t' -v exe="$exe" -v dir="$dir" '
          { tests[$1] = tests[$1] " " $0 }
          END { for (m in tests) print "it/" m, exe, dir, substr(tests[m], 2) }'
    else
      printf '%s\t%s\t%s\t\n' "$name" "$exe" "$dir"
    fi
  done <<<"$executables" |
    awk -F'\t' -v slowest="$SLOWEST" '
      BEGIN { n = split(slowest, s, " "); for (i = 1; i <= n; i++) rank[s[i]] = i }
      { m = $1; sub(/^it\//, "", m); sub(/\/(test|lib)$/, "", m)
        if ($1 ~ /\/lib$/) m = "lib"
        print ((m in rank) ? rank[m] : 99) "\t" $0 }' |
    sort -n -k1,1 -s | cut -f2-
}
tests=$(jobs_list)
if ! grep -q '^it/' <<<"$tests"; then
  echo "scripts/test.sh: the integration executable listed no tests" >&2
  exit 1
fi

# Runs every test executable (and the doc tests) against one claude, JOBS at
# a time, each one's output kept whole and printed when it is done; prints
# one closing line and fails if any failed.
run_suite() {
  local claude=$1 out=$scratch/$2 jobs=${JOBS:-2} i=0 failed=0
  mkdir -p "$out"
  export DUDUCLAW_TEST_CLAUDE=$claude RUST_TEST_THREADS=${TEST_THREADS:-2}
  echo "running the tests against $("$claude" --version), $jobs test jobs at a time" >&2
  while IFS=$'\t' read -r name exe dir names; do
    # A slot is free once a job has written its exit code: counted, not
    # inferred from `wait -n`, which also returns when clippy ends.
    while [ $((i - $(find "$out" -name '*.rc' | wc -l))) -ge "$jobs" ]; do
      wait -n || [ $? != 127 ] || break
    done
    i=$((i + 1))
    echo "$name" >"$out/$i.name"
    local filters=()
    # A module's tests, each by its whole name.
    if [ -n "$names" ]; then
      read -r -a filters <<<"--exact $names"
    fi
    (
      rc=0 start=$SECONDS
      cd "$dir" && "$exe" "${filters[@]}" >"$out/$i.log" 2>&1 || rc=$?
      echo "$rc" >"$out/$i.rc"
      # Progress while the others run; the output itself comes at the end.
      echo "  $name: $([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)") in $((SECONDS - start)) s" >&2
    ) &
  done <<<"$tests"
  i=$((i + 1))
  echo "doc tests" >"$out/$i.name"
  (
    rc=0
    cargo test --workspace --doc >"$out/$i.log" 2>&1 || rc=$?
    echo "$rc" >"$out/$i.rc"
  ) &
  wait
  local k
  for k in $(seq "$i"); do
    echo "== $(cat "$out/$k.name")"
    cat "$out/$k.log"
    if [ "$(cat "$out/$k.rc")" != 0 ]; then
      failed=1
      echo "== $(cat "$out/$k.name") FAILED (exit $(cat "$out/$k.rc"))"
    fi
  done
  # One closing line over every test executable (each prints its own).
  cat "$out"/*.log | awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }'
  # A test ignored for a missing server or claude is a test that did not
  # run: here both are given, so one means the build did not see them.
  local skipped
  skipped=$(grep -h "ignored, needs " "$out"/*.log || true)
  if [ -n "$skipped" ]; then
    echo "scripts/test.sh: tests were ignored for want of what this script provides:" >&2
    echo "$skipped" >&2
    failed=1
  fi
  return "$failed"
}

status=0
run_suite "$claude" pinned || status=1
wait "$clippy" || true
echo "== clippy"
cat "$scratch/clippy.log"
if [ "$(cat "$scratch/clippy.rc")" != 0 ]; then
  echo "== clippy FAILED (exit $(cat "$scratch/clippy.rc"))"
  status=1
fi
if [ -n "$other_claude" ]; then
  run_suite "$other_claude" other || status=1
fi
exit "$status"
