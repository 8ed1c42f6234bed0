#!/usr/bin/env bash
# The stores under tests/fixtures/, written by the earlier releases
# themselves, for tests/it/upgrade.rs (a store of every release must open with
# the current build and lose nothing).
#
#   scripts/fixtures.sh [RELEASE…]   every release below, or the ones named
#
# For each release it checks out the release's commit in a worktree of its
# own (`git worktree add`, under FIXTURES_WORK, default a new temporary
# folder), builds it there (debug, its own target folder), and drives that
# build through the real claude (the pinned one, scripts/claude.sh) against
# this tree's stand-in for the Messages API, as a user would: three turns
# of a task with a question answered, a second session of another person,
# a pin set and a fact added by hand; the side calls (pin, facts, and from
# 0.3 the clarify call) get the canned answers below. It writes:
#
#   tests/fixtures/store-REL.db    the SQLite file (checkpointed, VACUUMed)
#   tests/fixtures/server-REL.sql  for releases with the PostgreSQL store: a
#                                  plain-SQL pg_dump (--inserts, no owner or
#                                  privileges, no psql meta-commands) of a
#                                  database the release wrote the same way,
#                                  which a test loads with batch_execute
#
# The server dumps need DUDUCLAW_TEST_PG_URL (a superuser's URL, as
# `scripts/pg.sh start DIR` prints) and pg_dump and psql on PATH; the
# database made for each release is dropped afterwards. KEEP=1 keeps the
# worktrees (and their builds) for another run; otherwise they are removed
# with `git worktree remove`. Nothing of an old release's code is copied
# into this tree: only the stores it wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Which commit stands for each release. A release is what its entry in
# CHANGELOG.md (and docs/benchmarks.md's rounds) describe; its commit is
# the last one whose history holds that release and nothing of the next:
#   0.1  83f9a76  the first release, as issue 33 names it (schema 1).
#   0.2  469956e  the last commit before 86a9c84 (the clarify gate and
#                 migration 3, the first of round 3); it has the worker,
#                 stats, keywords and the PostgreSQL store, whose figures
#                 are in docs/benchmarks.md's round 2 (schema 2).
#   0.3  bd9cfa1  the tip of the branch pg-conn: round 3 (the clarify gate,
#                 forget --user with migration 4, the side-call bound, the
#                 tokio-postgres engine of round 3's part 9) and none of
#                 0.4's changes, which main had started beside it (a83ce40,
#                 0550386 are not in its history) (schema 4).
#   0.4  76041c7  the last commit before 0245e7f (the event log, migration
#                 5, the first of 0.5) (schema 4).
#   0.5  d70316c  the last commit of 0.5 ("README Changes 0.5" is a279310;
#                 the commit after it is a review of the tests), the base
#                 the 0.6 work starts from (schema 5).
releases=(
  "0.1 83f9a76"
  "0.2 469956e"
  "0.3 bd9cfa1"
  "0.4 76041c7"
  "0.5 d70316c"
)

die() {
  echo "fixtures.sh: $*" >&2
  exit 1
}

# The release's number as an integer to compare: 0.3 -> 3.
minor() { echo "${1#0.}"; }

wanted=("$@")
selected=()
for r in "${releases[@]}"; do
  set -- $r
  if [ ${#wanted[@]} -eq 0 ] || [[ " ${wanted[*]} " == *" $1 "* ]]; then
    selected+=("$r")
  fi
done
[ ${#selected[@]} -gt 0 ] || die "no such release: ${wanted[*]} (known: 0.1 to 0.5)"

for tool in git cargo sqlite3; do
  command -v "$tool" >/dev/null || die "$tool is not on PATH"
done
pg_url=${DUDUCLAW_TEST_PG_URL:-}
if [ -z "$pg_url" ]; then
  die "DUDUCLAW_TEST_PG_URL is not set: the server dumps need a PostgreSQL server (export DUDUCLAW_TEST_PG_URL=\$(scripts/pg.sh start /tmp/duduclaw-pg))"
fi
for tool in pg_dump psql; do
  command -v "$tool" >/dev/null || die "$tool is not on PATH (apt-get install postgresql-client)"
done

claude=$(scripts/claude.sh)
echo "building this tree's stand-in" >&2
cargo build --quiet -p standin --bin standin
standin="${CARGO_TARGET_DIR:-$root/target}/debug/standin"

if [ -n "${FIXTURES_WORK:-}" ]; then
  work=$FIXTURES_WORK
  own_work=
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/duduclaw-fixtures.XXXXXX")
  own_work=1
fi
run=$(mktemp -d "${TMPDIR:-/tmp}/duduclaw-fixture-run.XXXXXX")
standin_pid=
databases=()
worktrees=()
cleanup() {
  local rc=$?
  stop_standin
  for db in "${databases[@]}"; do
    psql "$pg_url" -qX -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  done
  if [ "${KEEP:-}" != 1 ]; then
    for wt in "${worktrees[@]}"; do
      git worktree remove --force "$wt" || true
    done
    [ -z "$own_work" ] || rm -rf "$work"
  fi
  if [ $rc = 0 ]; then
    rm -rf "$run"
  else
    echo "fixtures.sh: failed; the releases' output and stores are kept in $run" >&2
  fi
}
stop_standin() {
  if [ -n "$standin_pid" ]; then
    kill "$standin_pid" 2>/dev/null || true
    wait "$standin_pid" 2>/dev/null || true
    standin_pid=
  fi
}
trap cleanup EXIT

# Start the stand-in for one turn: the main reply, then the answers of the
# side calls, told apart by their system prompts (the same words in every
# release): the pin ("task to pin"), the facts ("durable facts") and the
# clarify call ("clarifies the pinned task"); any other side call gets NONE.
standin_url=
start_standin() {
  local reply=$1 pin=$2 facts=$3 clarify=$4
  stop_standin
  # A new file each time: a URL is never read from an earlier stand-in's.
  local url_file
  url_file=$(mktemp "$run/standin.url.XXXXXX")
  "$standin" --verbose --reply "$reply" --side-reply NONE \
    --side-reply-for "durable facts=$facts" \
    --side-reply-for "clarifies the pinned task=$clarify" \
    --side-reply-for "task to pin=$pin" \
    >"$url_file" 2>>"$run/standin.log" &
  standin_pid=$!
  for _ in $(seq 600); do
    grep -q '^http' "$url_file" && break
    kill -0 "$standin_pid" 2>/dev/null || { cat "$run/standin.log" >&2; die "the stand-in did not start"; }
    sleep 0.05
  done
  standin_url=$(head -n 1 "$url_file")
  [[ "$standin_url" == http* ]] || die "the stand-in printed no URL in 30 s (its output: $(cat "$url_file"))"
}

# Wait until no process of this run is left (a detached side-call worker
# that has just finished), so the store is written out before it is copied.
wait_quiet() {
  local home=$1
  for _ in $(seq 600); do
    local busy=0
    for env in /proc/[0-9]*/environ; do
      if grep -qzx "HOME=$home" "$env" 2>/dev/null; then
        busy=1
        break
      fi
    done
    [ $busy = 0 ] && return 0
    sleep 0.1
  done
  die "processes of the release's run are still running after 60 s"
}

# The release's build, with a clean environment: its own HOME, the store,
# the pinned claude, and claude pointed at the stand-in.
old() {
  (cd "$home/project" && env -i \
    PATH=/usr/local/bin:/usr/bin:/bin \
    HOME="$home" TMPDIR="$home/tmp" \
    DUDUCLAW_DB="$db" DUDUCLAW_CLAUDE="$claude" \
    ANTHROPIC_BASE_URL="$standin_url" ANTHROPIC_API_KEY=fixture-key \
    DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
    "$bin" "$@")
}

# One turn: stand-in answers, then the message. From 0.2 side calls run in
# a detached worker: --wait-side makes the turn wait for them, as 0.1 did.
turn() {
  local reply=$1 pin=$2 facts=$3 clarify=$4
  shift 4
  start_standin "$reply" "$pin" "$facts" "$clarify"
  local wait=()
  [ "$(minor "$rel")" -ge 2 ] && wait=(--wait-side)
  echo "== turn $*" >>"$run/$rel.log"
  old -v turn --timeout 120 "${wait[@]}" "$@" >>"$run/$rel.log" 2>&1
  stop_standin
}

# A facts answer in the release's format: plain lines in 0.1, `- FACT |
# keywords` from 0.2 on.
facts() {
  local out= line
  for line in "$@"; do
    if [ "$(minor "$rel")" -ge 2 ]; then
      out+="- $line"$'\n'
    else
      out+="- ${line%% | *}"$'\n'
    fi
  done
  printf '%s' "$out"
}

# The conversation every release writes.
scenario() {
  local r
  r=$(minor "$rel")
  local task_pin="Migrate the billing service from Python 3.8 to 3.12; keep the public API unchanged; do not touch the payment provider code"
  # 1: the task. The reply asks a question.
  turn "Start with a dependency audit: list every package and check its support for 3.12. Which test runner do you use?" \
    "$task_pin" \
    "$(facts "The billing service runs on Python 3.8 | billing, python, version, upgrade" \
      "The payment provider code must not be changed | payments, provider, constraint")" \
    NONE \
    --agent ops --channel deploy \
    "Migrate the billing service from Python 3.8 to 3.12. Keep the public API unchanged and do not touch the payment provider code."
  # 2: the answer. Up to 0.2 it joins the pin as typed; from 0.3 the
  # clarify call condenses it (and 0.5's facts call reports a correction).
  local f2
  f2=$(facts "Tests run with pytest and coverage | tests, pytest, coverage, CI")
  if [ "$r" -ge 5 ]; then
    f2+=$'\n'"CORRECTION: Run the tests with pytest, never unittest | tests, pytest, unittest"
    f2+=$'\n'"DRIFT: minor | the reply plans CI before the dependency audit is done"
  fi
  turn "Good: add a CI job that runs pytest on 3.12 beside 3.8. Should I draft the CI matrix?" \
    NONE "$f2" "keep CI green on every commit; the tests run with pytest and coverage" \
    --agent ops --channel deploy \
    "We use pytest with coverage, and CI must stay green on every commit."
  # 3: a short yes: no facts call (too short to state anything durable),
  # and from 0.3 a clarify call that finds nothing to add.
  turn "Here is the matrix: python-version [3.8, 3.12], with pytest --cov on each." \
    NONE NONE NONE \
    --agent ops --channel deploy \
    "Yes, draft it for GitHub Actions."
  # Another person's session: its first message is no task (no pin), and
  # its facts are that person's.
  turn "Noted: eu-west-1 only." \
    NONE "$(facts "Deploys only to eu-west-1, never us-east-1 | region, AWS, deploy, eu-west-1")" NONE \
    --agent ops --channel chat --thread t-42 --user alice \
    "Remind the team: we deploy only to eu-west-1, never to us-east-1."
  start_standin unused NONE NONE NONE
  old pin set --agent ops --channel chat --thread t-42 "Keep every deployment in eu-west-1" >>"$run/$rel.log"
  if [ "$r" -ge 2 ]; then
    old facts add --agent ops "Deploys go through Argo CD" --keywords "deploy, GitOps, Argo CD, release" >>"$run/$rel.log"
  else
    old facts add --agent ops "Deploys go through Argo CD" >>"$run/$rel.log"
  fi
  stop_standin
}

for r in "${selected[@]}"; do
  set -- $r
  rel=$1
  commit=$2
  wt="$work/old-$rel"
  if [ -d "$wt" ]; then
    [ "$(git -C "$wt" rev-parse HEAD)" = "$(git rev-parse "$commit^{commit}")" ] ||
      die "$wt exists but is not at $commit"
  else
    git worktree add --detach "$wt" "$commit" >&2
  fi
  worktrees+=("$wt")
  echo "release $rel ($commit): building in $wt" >&2
  (cd "$wt" && CARGO_TARGET_DIR="$wt/target" cargo build --quiet --locked --bin duduclaw-session)
  bin="$wt/target/debug/duduclaw-session"

  # The SQLite file.
  home="$run/$rel-file"
  mkdir -p "$home/project" "$home/tmp"
  mkdir -p "$home/store"
  db="$home/store/sessions.db"
  echo "release $rel: writing a SQLite store" >&2
  scenario
  wait_quiet "$home"
  sqlite3 "$db" "PRAGMA wal_checkpoint(TRUNCATE); VACUUM;" >/dev/null
  [ ! -s "$db-wal" ] || die "$db-wal is not empty after the checkpoint"
  install -m 644 "$db" "tests/fixtures/store-$rel.db"
  echo "release $rel: tests/fixtures/store-$rel.db ($(stat -c %s "$db") bytes, schema $(sqlite3 "$db" 'PRAGMA user_version'))" >&2

  # The PostgreSQL database, from 0.2.
  if [ "$(minor "$rel")" -ge 2 ]; then
    name="fixture_${rel/./_}_$$"
    psql "$pg_url" -qX -v ON_ERROR_STOP=1 -c "CREATE DATABASE $name" >/dev/null
    databases+=("$name")
    base=${pg_url%%\?*}
    db="${base%/*}/$name${pg_url#"$base"}"
    home="$run/$rel-server"
    mkdir -p "$home/project" "$home/tmp"
    echo "release $rel: writing a PostgreSQL store" >&2
    scenario
    wait_quiet "$home"
    # psql's \restrict lines (pg_dump 15.14 and later) are no SQL: a test
    # loads the dump with batch_execute, not psql.
    pg_dump --inserts --no-owner --no-privileges --no-comments -d "$db" |
      grep -v -e '^\\restrict ' -e '^\\unrestrict ' >"tests/fixtures/server-$rel.sql"
    echo "release $rel: tests/fixtures/server-$rel.sql ($(stat -c %s "tests/fixtures/server-$rel.sql") bytes)" >&2
  fi
done
echo "done" >&2
