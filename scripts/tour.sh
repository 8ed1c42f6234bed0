#!/usr/bin/env bash
# The tour (docs/tour.md) on a machine with no Anthropic account: the pinned
# Claude Code (installed into .tools/claude if missing, as scripts/test.sh
# does) talks to the test suite's stand-in for the Messages API on loopback,
# answering the tour's canned replies.
#
#   scripts/tour.sh             a bash shell set up for the tour; leaving it
#                               (`exit`, Ctrl-D) stops the stand-in and
#                               deletes the tour's folder
#   scripts/tour.sh CMD [ARG]…  runs CMD in that setup instead of a shell
#                               (e.g. `scripts/tour.sh bash my-tour.sh`),
#                               then stops the same way
#
# Everything lives in one temporary folder, the tour's HOME: the store,
# claude's transcripts and settings, and the temporary files of claude and
# of the program (TMPDIR). Your own store, claude login and settings are
# never read or written.
#
# TOUR_BIN_DIR=DIR uses the duduclaw-session and standin already built in
# DIR instead of running cargo build (the test of the tour does: it runs
# the binaries under test).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

claude=$(scripts/claude.sh)
if [ -n "${TOUR_BIN_DIR:-}" ]; then
  target=$TOUR_BIN_DIR
else
  echo "building duduclaw-session and the stand-in (cargo build; the first build takes a few minutes)" >&2
  cargo build --quiet --workspace --bins
  target="${CARGO_TARGET_DIR:-$root/target}/debug"
fi

tour=$(mktemp -d "${TMPDIR:-/tmp}/duduclaw-tour.XXXXXX")
standin_pid=
stop() {
  if [ -n "$standin_pid" ]; then
    kill "$standin_pid" 2>/dev/null || true
    wait "$standin_pid" 2>/dev/null || true
  fi
  # What a turn started detached (the warm host and its claudes, a side-call
  # worker) has the tour's HOME: it ends with the tour, not minutes later in
  # a folder gone. (The list may name this grep, gone by then.)
  local pids alive p
  pids=$(grep -lzxsF "HOME=$tour/home" /proc/[0-9]*/environ | cut -d/ -f3 | grep -vx -e "$$" -e "$BASHPID" || true)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086 # one word per pid
    kill $pids 2>/dev/null || true
    for _ in $(seq 100); do
      alive=
      for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ -z "$alive" ] && break
      sleep 0.05
    done
  fi
  rm -rf "$tour"
  echo "tour: stand-in stopped, $tour deleted" >&2
}
trap stop EXIT
mkdir -p "$tour/home" "$tour/tmp"

# The tour's replies, as a model would give them. Every turn gets the same
# text, which ends with a question. Each kind of side call is told by its
# own system prompt (src/memory/) and answers in its own format: the pin
# condenses the tour's first message into its task; the memory call finds
# one fact with its search keywords (`- FACT | keyword, …`), condenses an
# answer to the reply's question into one line (taken only where the
# message answered one) and judges the reply on task; the consolidation and
# the summary answer as theirs would. tests/it/first_hour.rs
# runs the tour and checks that the pin is the task.
"$target/standin" \
  --reply "Start with vite.config.ts: add @vitejs/plugin-react and move index.html to the root. Which Node version do you run?" \
  --side-reply-for "Condense the user's opening message=Migrate the React app from CRA to Vite; keep the tests passing; do not touch the auth flow" \
  --side-reply-for "durable facts=## 1"$'\n'"- Deploys preview builds to Vercel | deploy, previews, hosting, Vercel, 部署, 預覽"$'\n'"CLARIFY: target Node 20; keep the service worker behaviour as it is"$'\n'"DRIFT: none" \
  --side-reply-for "Rewrite this pinned task=Migrate the React app from CRA to Vite on Node 20; keep the tests passing, the service worker as it is, and the auth flow untouched" \
  --side-reply-for "Summarize the earlier part=The user is migrating a React app from CRA to Vite (tests must keep passing, the auth flow stays untouched); the assistant suggested starting with vite.config.ts." \
  >"$tour/standin.url" 2>"$tour/standin.log" &
standin_pid=$!
# The stand-in prints its URL (a free port) as its first line once it listens.
for _ in $(seq 100); do
  [ -s "$tour/standin.url" ] && break
  kill -0 "$standin_pid" 2>/dev/null || { cat "$tour/standin.log" >&2; exit 1; }
  sleep 0.05
done
url=$(head -n 1 "$tour/standin.url")
[ -n "$url" ] || { echo "tour: the stand-in printed no URL" >&2; exit 1; }

# Nothing of the caller's own setup may steer the tour elsewhere (another
# model provider, another store, another claude): unset here, and in the
# lines printed for another terminal, every such variable set here and
# every DUDUCLAW_* the program reads (the flags in src/cmd/ declare them
# all, as `env = "..."`), set there or not.
steering=(XDG_DATA_HOME XDG_RUNTIME_DIR CLAUDE_CONFIG_DIR)
for v in $(compgen -e); do
  case "$v" in ANTHROPIC_* | CLAUDE_* | CLAUDECODE | DUDUCLAW_*) steering+=("$v") ;; esac
done
read -r -a ours <<<"$(grep -rhoE 'env = "DUDUCLAW_[A-Z_]*"' src/cmd | grep -o 'DUDUCLAW_[A-Z_]*' | sort -u | tr '\n' ' ')"
steering+=("${ours[@]}")
for v in "${steering[@]}"; do unset "$v"; done
exports=(
  "HOME=$tour/home"
  "PATH=$target:$(dirname "$claude"):$PATH"
  # claude's temporary files (and ours) go with the tour's folder.
  "TMPDIR=$tour/tmp"
  # claude sends every model call to the stand-in; any key will do.
  "ANTHROPIC_BASE_URL=$url"
  "ANTHROPIC_API_KEY=tour-key"
  # Keep claude from phoning home for updates or telemetry.
  "DISABLE_AUTOUPDATER=1"
  "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"
  "DUDUCLAW_AGENT=me"
  "DUDUCLAW_CHANNEL=terminal"
  "DUDUCLAW_WAIT_SIDE=1"
  # The memory call after every exchange, so each command shows its result.
  "DUDUCLAW_MEMORY_EVERY=1"
)
unsets=()
for v in $(printf '%s\n' "${steering[@]}" | sort -u); do
  case " ${exports[*]%%=*} " in *" $v "*) ;; *) unsets+=("$v") ;; esac
done
for e in "${exports[@]}"; do export "${e?}"; done
cd "$HOME"

{
  echo "tour: stand-in at $url (pid $standin_pid), claude $("$claude" --version), HOME=$HOME"
  echo "tour: to use the tour from another terminal while this one is open, paste:"
  echo "  unset ${unsets[*]}"
  for e in "${exports[@]}"; do printf '  export %q\n' "$e"; done
} >&2

if [ "$#" -gt 0 ]; then
  "$@"
else
  echo "tour: run the tour's commands (docs/tour.md) here; 'exit' stops the stand-in" >&2
  PS1='(tour) $ ' bash --noprofile --norc -i
fi
