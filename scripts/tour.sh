#!/usr/bin/env bash
# The README's tour on a machine with no Anthropic account: the pinned
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
# claude's transcripts and settings. Your own store, claude login and
# settings are never read or written.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

claude=$(scripts/claude.sh)
echo "building duduclaw-session and the stand-in (cargo build; the first build takes a few minutes)" >&2
cargo build --quiet --workspace --bins
target="${CARGO_TARGET_DIR:-$root/target}/debug"

tour=$(mktemp -d "${TMPDIR:-/tmp}/duduclaw-tour.XXXXXX")
standin_pid=
stop() {
  if [ -n "$standin_pid" ]; then
    kill "$standin_pid" 2>/dev/null || true
    wait "$standin_pid" 2>/dev/null || true
  fi
  rm -rf "$tour"
  echo "tour: stand-in stopped, $tour deleted" >&2
}
trap stop EXIT
mkdir -p "$tour/home"

# The tour's replies: every turn gets the same text, which ends with a
# question; a facts side call finds one fact with its search keywords
# (`- FACT | keyword, …`); the clarify side call (its system prompt says
# "clarifies the pinned task") condenses the answer into one line.
"$target/standin" \
  --reply "Start with vite.config.ts: add @vitejs/plugin-react and move index.html to the root. Which Node version do you run?" \
  --side-reply "- Deploys preview builds to Vercel | deploy, previews, hosting, Vercel, 部署, 預覽" \
  --side-reply-for "clarifies the pinned task=target Node 20; keep the service worker behaviour as it is" \
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
# model provider, another store, another claude).
for v in $(compgen -e); do
  case "$v" in ANTHROPIC_* | CLAUDE_* | CLAUDECODE | DUDUCLAW_* | XDG_DATA_HOME | XDG_RUNTIME_DIR) unset "$v" ;; esac
done
exports=(
  "HOME=$tour/home"
  "PATH=$target:$(dirname "$claude"):$PATH"
  # claude sends every model call to the stand-in; any key will do.
  "ANTHROPIC_BASE_URL=$url"
  "ANTHROPIC_API_KEY=tour-key"
  # Keep claude from phoning home for updates or telemetry.
  "DISABLE_AUTOUPDATER=1"
  "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"
  "DUDUCLAW_AGENT=me"
  "DUDUCLAW_CHANNEL=terminal"
  "DUDUCLAW_WAIT_SIDE=1"
)
for e in "${exports[@]}"; do export "${e?}"; done
cd "$HOME"

{
  echo "tour: stand-in at $url (pid $standin_pid), claude $("$claude" --version), HOME=$HOME"
  echo "tour: to use the tour from another terminal while this one is open, paste:"
  for e in "${exports[@]}"; do printf '  export %q\n' "$e"; done
} >&2

if [ "$#" -gt 0 ]; then
  "$@"
else
  echo "tour: run the README's tour commands here; 'exit' stops the stand-in" >&2
  PS1='(tour) $ ' bash --noprofile --norc -i
fi
