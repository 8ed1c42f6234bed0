#!/usr/bin/env bash
# The Claude Code the tests and the tour drive, installed with npm when it
# is missing; prints the path of its `claude` on stdout (everything else
# goes to stderr).
#
#   scripts/claude.sh           the pinned version, in .tools/claude (where
#                               tests/it/common/mod.rs looks by default)
#   scripts/claude.sh VERSION   that version, in .tools/claude-VERSION, so
#                               the pinned install is never replaced
#   scripts/claude.sh latest    the newest on the npm registry (`npm view`),
#                               in .tools/claude-VERSION likewise
#
# The pin is here and only here: the version the suite is known to pass on.
set -euo pipefail
cd "$(dirname "$0")/.."

PINNED=2.1.328
version="${1:-$PINNED}"
if [ "$version" = latest ]; then
  version=$(npm view @anthropic-ai/claude-code version)
  echo "the newest @anthropic-ai/claude-code on the npm registry is $version" >&2
fi
if [ "$version" = "$PINNED" ]; then
  tools=.tools/claude
else
  tools=".tools/claude-$version"
fi
installed="$tools/node_modules/@anthropic-ai/claude-code/package.json"
if ! grep -q "\"version\": \"$version\"" "$installed" 2>/dev/null; then
  echo "installing @anthropic-ai/claude-code@$version into $tools" >&2
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-audit --no-fund --no-save --loglevel=error \
    "@anthropic-ai/claude-code@$version" >&2
fi
echo "$PWD/$tools/node_modules/.bin/claude"
