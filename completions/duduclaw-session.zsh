#compdef duduclaw-session

autoload -U is-at-least

_duduclaw-session() {
    typeset -A opt_args
    typeset -a _arguments_options
    local ret=1

    if is-at-least 5.2; then
        _arguments_options=(-s -S -C)
    else
        _arguments_options=(-s -C)
    fi

    local context curcontext="$curcontext" state line
    _arguments "${_arguments_options[@]}" : \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
'-V[Print version]' \
'--version[Print version]' \
":: :_duduclaw-session_commands" \
"*::: :->duduclaw-session" \
&& ret=0
    case $state in
    (duduclaw-session)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-command-$line[1]:"
        case $line[1] in
            (turn)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent (bot, persona) this conversation belongs to \[required\]]:ID:_default' \
'--channel=[The channel (chat, room, terminal) of the conversation \[required\]]:ID:_default' \
'--thread=[An optional thread inside the channel]:ID:_default' \
'*--attach=[A file to send with the message (repeatable)\: a PNG, JPEG, GIF or WebP image, a PDF, or UTF-8 text (a log, code, CSV), by its bytes; \`-\` reads it from stdin when the message is an argument]:PATH:_files' \
'--model=[Model for the main call (passed to claude --model)]:MODEL:_default' \
'--extract-model=[Model for the side calls (pin, facts, summaries, keywords) whose job does not name one]:MODEL:_default' \
'--side-timeout=[Bound on each side call (seconds, or e.g. 45s, 2m; at most 1h)\: the time it runs or waits on the network; time a loaded host keeps it waiting for a CPU is not counted, up to 4 times the bound in all]:DURATION:_default' \
'--side-concurrency=[Side calls that run at once on this host, counted across every worker, \`jobs run\` and \`--wait-side\` turn (1 to 64)]:N:_default' \
'--timeout=[Give up on the main call after this long (seconds, or e.g. 90s, 10m; at most 24h)]:DURATION:_default' \
'--user=[Scope facts to one person as well as the agent]:ID:_default' \
'--compact-at=[Compact the session when its context passes this many estimated tokens]:TOKENS:_default' \
'--facts-in=[Where the injected facts go]:WHERE:((message\:"At the head of the user message, after the recap (keeps the system prompt byte-stable)"
system\:"At the tail of the system prompt, after the pin"))' \
'--memory-every=[Run the memory side call (facts, corrections, clarifications, drift) once this many substantive exchanges wait (1\: after each; a pause past --cache-ttl, a compaction and \`jobs run\` run it sooner)]:N:_default' \
'--system-pin=[When the pin goes at the system-prompt tail (the recap always carries the newest pin)]:WHEN:((auto\:"The newest pin when a handle starts or the prompt cache has gone cold (--cache-ttl); meanwhile the system prompt stays byte-identical and a newer pin rides in the recap"
always\:"The newest pin on every turn\: each pin change while the cache is warm re-writes the whole conversation'\''s prompt cache"
never\:"Never\: the pin rides in the recap at the head of each message only"))' \
'--cache-ttl=[How long the prompt cache stays warm after a turn (the API'\''s default lifetime is 5m; 0s\: always cold; at most 24h)]:DURATION:_default' \
'--profile-tokens=[The profile'\''s budget, in estimated tokens\: the scope'\''s standing facts (all its facts when they fit) at the system-prompt tail, after the pin (0\: no profile)]:N:_default' \
'--warm-max=[At most this many claudes kept running on this host, over every session (the least recently used ends first)]:N:_default' \
'*--claude-arg=[An argument passed to claude for the main call (repeatable), e.g. --claude-arg=--add-dir=/src]:ARG:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--again[Send the session'\''s last failed message again, as a normal turn]' \
'--json[Print one JSON object instead of streaming the reply]' \
'(--json)--stream-json[JSON Lines as the turn happens\: start, each piece of text, each tool used, then done (the --json object) or error]' \
'(--no-direct-api)--direct-api[Send calls straight to the Messages API (needs ANTHROPIC_API_KEY)]' \
'--no-direct-api[Never fall back to the Messages API when claude is missing or not logged in]' \
'--no-extract[Skip pin and fact extraction (compaction still runs\: it guards the context size)]' \
'--no-compact[Never compact the session, however long it grows]' \
'--light[Run the main call on the lightweight flags (no tools, one model turn)]' \
'--wait-side[Wait (bounded by --side-timeout) for this turn'\''s side calls instead of leaving them to the detached worker]' \
'--no-user-setup[Run the main call without your MCP servers, hooks, skills and CLAUDE.md, as side calls always run (for a bot they only slow down)]' \
'--no-warm[Start claude afresh for every turn instead of keeping the session'\''s claude running between turns (in the per-host process \`duduclaw-session host\`)]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
'::message -- The message; absent or `-` reads stdin to EOF; after `--` it may start with `-`:_default' \
&& ret=0
;;
(id)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent (bot, persona) this conversation belongs to \[required\]]:ID:_default' \
'--channel=[The channel (chat, room, terminal) of the conversation \[required\]]:ID:_default' \
'--thread=[An optional thread inside the channel]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(pin)
_arguments "${_arguments_options[@]}" : \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
":: :_duduclaw-session__subcmd__pin_commands" \
"*::: :->pin" \
&& ret=0

    case $state in
    (pin)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-pin-command-$line[1]:"
        case $line[1] in
            (show)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent (bot, persona) this conversation belongs to \[required\]]:ID:_default' \
'--channel=[The channel (chat, room, terminal) of the conversation \[required\]]:ID:_default' \
'--thread=[An optional thread inside the channel]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(set)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent (bot, persona) this conversation belongs to \[required\]]:ID:_default' \
'--channel=[The channel (chat, room, terminal) of the conversation \[required\]]:ID:_default' \
'--thread=[An optional thread inside the channel]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
':text -- The new pinned task:_default' \
&& ret=0
;;
(append)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent (bot, persona) this conversation belongs to \[required\]]:ID:_default' \
'--channel=[The channel (chat, room, terminal) of the conversation \[required\]]:ID:_default' \
'--thread=[An optional thread inside the channel]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
':text -- The clarification to add:_default' \
&& ret=0
;;
(clear)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent (bot, persona) this conversation belongs to \[required\]]:ID:_default' \
'--channel=[The channel (chat, room, terminal) of the conversation \[required\]]:ID:_default' \
'--thread=[An optional thread inside the channel]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(history)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent (bot, persona) this conversation belongs to \[required\]]:ID:_default' \
'--channel=[The channel (chat, room, terminal) of the conversation \[required\]]:ID:_default' \
'--thread=[An optional thread inside the channel]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--json[Print a JSON array of revisions (rev, pin, source, turn_id, from_rev, created_at)]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(restore)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent (bot, persona) this conversation belongs to \[required\]]:ID:_default' \
'--channel=[The channel (chat, room, terminal) of the conversation \[required\]]:ID:_default' \
'--thread=[An optional thread inside the channel]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
':rev -- The revision number:_default' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_duduclaw-session__subcmd__pin__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-pin-help-command-$line[1]:"
        case $line[1] in
            (show)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(set)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(append)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(clear)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(history)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(restore)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
;;
(facts)
_arguments "${_arguments_options[@]}" : \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
":: :_duduclaw-session__subcmd__facts_commands" \
"*::: :->facts" \
&& ret=0

    case $state in
    (facts)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-facts-command-$line[1]:"
        case $line[1] in
            (list)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent whose facts these are \[required\]]:ID:_default' \
'--user=[One person\: reads include their facts with the agent-wide ones; writes store facts for them only]:ID:_default' \
'--limit=[Show at most N facts]:N:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--json[Print a JSON array of objects (id, content, user, session_id, source_turn, origin, held, ...)]' \
'--pending[The facts waiting for review instead, oldest first (they ride in no prompt)]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(approve)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent whose facts these are \[required\]]:ID:_default' \
'--user=[One person\: reads include their facts with the agent-wide ones; writes store facts for them only]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
'*::ids -- Ids of the agent'\''s waiting facts (from `facts list --pending`):_default' \
&& ret=0
;;
(reject)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent whose facts these are \[required\]]:ID:_default' \
'--user=[One person\: reads include their facts with the agent-wide ones; writes store facts for them only]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
'*::ids -- Ids of the agent'\''s waiting facts (from `facts list --pending`):_default' \
&& ret=0
;;
(review)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent \[required\]]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
'::state -- on or off; none\: print the setting:(on off)' \
&& ret=0
;;
(search)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent whose facts these are \[required\]]:ID:_default' \
'--user=[One person\: reads include their facts with the agent-wide ones; writes store facts for them only]:ID:_default' \
'--limit=[Show at most N facts]:N:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--json[Print a JSON array of objects (id, content, access_count, score, ...)]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
':query -- Words to look for (plain text, not FTS syntax):_default' \
&& ret=0
;;
(add)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent whose facts these are \[required\]]:ID:_default' \
'--user=[One person\: reads include their facts with the agent-wide ones; writes store facts for them only]:ID:_default' \
'--keywords=[Search keywords, comma-separated\: words people may ask with (synonyms, the other language'\''s terms)]:LIST:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--standing[A standing fact\: it matters whatever the conversation is about (health, allergies, family, hard rules, fixed schedules), so the profile carries it in every conversation'\''s system prompt]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
':text -- The fact\: one line, at most 1,000 characters, no secrets:_default' \
&& ret=0
;;
(stand)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent whose facts these are \[required\]]:ID:_default' \
'--user=[One person\: reads include their facts with the agent-wide ones; writes store facts for them only]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--clear[Take the mark off instead]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
'*::ids -- Ids of the agent'\''s facts (from `facts list`):_default' \
&& ret=0
;;
(forget)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent whose facts these are \[required\]]:ID:_default' \
'--user=[One person\: reads include their facts with the agent-wide ones; writes store facts for them only]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
'*::ids -- Ids of the agent'\''s facts to delete:_default' \
&& ret=0
;;
(import)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent whose facts these are \[required\]]:ID:_default' \
'--user=[One person\: reads include their facts with the agent-wide ones; writes store facts for them only]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
':file -- One JSON object per line with at least "content"; `-` reads stdin:_files' \
&& ret=0
;;
(export)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent whose facts these are \[required\]]:ID:_default' \
'--user=[One person\: reads include their facts with the agent-wide ones; writes store facts for them only]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(enrich)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent whose facts to enrich]:ID:_default' \
'--limit=[Enrich at most N facts in this run]:N:_default' \
'--extract-model=[Model for the side calls (pin, facts, summaries, keywords) whose job does not name one]:MODEL:_default' \
'--side-timeout=[Bound on each side call (seconds, or e.g. 45s, 2m; at most 1h)\: the time it runs or waits on the network; time a loaded host keeps it waiting for a CPU is not counted, up to 4 times the bound in all]:DURATION:_default' \
'--side-concurrency=[Side calls that run at once on this host, counted across every worker, \`jobs run\` and \`--wait-side\` turn (1 to 64)]:N:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--all[Every agent'\''s facts (instead of --agent'\''s)]' \
'--json[Print a JSON summary (facts enriched and left, jobs, cost)]' \
'(--no-direct-api)--direct-api[Send calls straight to the Messages API (needs ANTHROPIC_API_KEY)]' \
'--no-direct-api[Never fall back to the Messages API when claude is missing or not logged in]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_duduclaw-session__subcmd__facts__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-facts-help-command-$line[1]:"
        case $line[1] in
            (list)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(approve)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(reject)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(review)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(search)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(add)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(stand)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(forget)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(import)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(export)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(enrich)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
;;
(history)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent (bot, persona) this conversation belongs to \[required\]]:ID:_default' \
'--channel=[The channel (chat, room, terminal) of the conversation \[required\]]:ID:_default' \
'--thread=[An optional thread inside the channel]:ID:_default' \
'--limit=[Show only the last N turns]:N:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--json[Print a JSON array of turns (role, content, status, usage, ...)]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(sessions)
_arguments "${_arguments_options[@]}" : \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
":: :_duduclaw-session__subcmd__sessions_commands" \
"*::: :->sessions" \
&& ret=0

    case $state in
    (sessions)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-sessions-command-$line[1]:"
        case $line[1] in
            (list)
_arguments "${_arguments_options[@]}" : \
'--agent=[Only this agent'\''s sessions]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--json[Print a JSON array of session objects]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(show)
_arguments "${_arguments_options[@]}" : \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--json[Print a JSON object]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
':id -- The session id (from `id` or `sessions list`):_default' \
&& ret=0
;;
(rm)
_arguments "${_arguments_options[@]}" : \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
'*::ids -- Session ids (from `id` or `sessions list`):_default' \
&& ret=0
;;
(prune)
_arguments "${_arguments_options[@]}" : \
'--older-than=[How long unused, e.g. 30d, 12h, 1week 2days]:DURATION:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--dry-run[Only list what would be deleted]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_duduclaw-session__subcmd__sessions__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-sessions-help-command-$line[1]:"
        case $line[1] in
            (list)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(show)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(rm)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(prune)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
;;
(jobs)
_arguments "${_arguments_options[@]}" : \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
":: :_duduclaw-session__subcmd__jobs_commands" \
"*::: :->jobs" \
&& ret=0

    case $state in
    (jobs)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-jobs-command-$line[1]:"
        case $line[1] in
            (list)
_arguments "${_arguments_options[@]}" : \
'--agent=[Only this agent'\''s sessions]:ID:_default' \
'--channel=[With --agent\: only this channel'\''s session]:ID:_default' \
'--thread=[With --agent and --channel\: only this thread'\''s session]:ID:_default' \
'--since=[Finished jobs this recent are listed too, e.g. 1h, 7d]:DURATION:_default' \
'--side-concurrency=[Side calls that run at once on this host, counted across every worker, \`jobs run\` and \`--wait-side\` turn (1 to 64)]:N:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--all[The whole store, whatever --agent/--channel/--thread or their environment variables say]' \
'--json[Print a JSON array of job objects (with \`waiting\`\: why a job still queued has not run)]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(run)
_arguments "${_arguments_options[@]}" : \
'--agent=[Only this agent'\''s sessions]:ID:_default' \
'--channel=[With --agent\: only this channel'\''s session]:ID:_default' \
'--thread=[With --agent and --channel\: only this thread'\''s session]:ID:_default' \
'--extract-model=[Model for the side calls (pin, facts, summaries, keywords) whose job does not name one]:MODEL:_default' \
'--side-timeout=[Bound on each side call (seconds, or e.g. 45s, 2m; at most 1h)\: the time it runs or waits on the network; time a loaded host keeps it waiting for a CPU is not counted, up to 4 times the bound in all]:DURATION:_default' \
'--side-concurrency=[Side calls that run at once on this host, counted across every worker, \`jobs run\` and \`--wait-side\` turn (1 to 64)]:N:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--all[The whole store, whatever --agent/--channel/--thread or their environment variables say]' \
'(--no-direct-api)--direct-api[Send calls straight to the Messages API (needs ANTHROPIC_API_KEY)]' \
'--no-direct-api[Never fall back to the Messages API when claude is missing or not logged in]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(retry)
_arguments "${_arguments_options[@]}" : \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
':id -- The job id (from `jobs list`):_default' \
&& ret=0
;;
(work)
_arguments "${_arguments_options[@]}" : \
'--settings=[The worker'\''s settings, as the turn that starts it writes them]:JSON:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_duduclaw-session__subcmd__jobs__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-jobs-help-command-$line[1]:"
        case $line[1] in
            (list)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(run)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(retry)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(work)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
;;
(prompt)
_arguments "${_arguments_options[@]}" : \
'--agent=[The agent (bot, persona) this conversation belongs to \[required\]]:ID:_default' \
'--channel=[The channel (chat, room, terminal) of the conversation \[required\]]:ID:_default' \
'--thread=[An optional thread inside the channel]:ID:_default' \
'*--attach=[A file to send with the message (repeatable)\: a PNG, JPEG, GIF or WebP image, a PDF, or UTF-8 text (a log, code, CSV), by its bytes; \`-\` reads it from stdin when the message is an argument]:PATH:_files' \
'--model=[Model for the main call (passed to claude --model)]:MODEL:_default' \
'--extract-model=[Model for the side calls (pin, facts, summaries, keywords) whose job does not name one]:MODEL:_default' \
'--side-timeout=[Bound on each side call (seconds, or e.g. 45s, 2m; at most 1h)\: the time it runs or waits on the network; time a loaded host keeps it waiting for a CPU is not counted, up to 4 times the bound in all]:DURATION:_default' \
'--side-concurrency=[Side calls that run at once on this host, counted across every worker, \`jobs run\` and \`--wait-side\` turn (1 to 64)]:N:_default' \
'--timeout=[Give up on the main call after this long (seconds, or e.g. 90s, 10m; at most 24h)]:DURATION:_default' \
'--user=[Scope facts to one person as well as the agent]:ID:_default' \
'--compact-at=[Compact the session when its context passes this many estimated tokens]:TOKENS:_default' \
'--facts-in=[Where the injected facts go]:WHERE:((message\:"At the head of the user message, after the recap (keeps the system prompt byte-stable)"
system\:"At the tail of the system prompt, after the pin"))' \
'--memory-every=[Run the memory side call (facts, corrections, clarifications, drift) once this many substantive exchanges wait (1\: after each; a pause past --cache-ttl, a compaction and \`jobs run\` run it sooner)]:N:_default' \
'--system-pin=[When the pin goes at the system-prompt tail (the recap always carries the newest pin)]:WHEN:((auto\:"The newest pin when a handle starts or the prompt cache has gone cold (--cache-ttl); meanwhile the system prompt stays byte-identical and a newer pin rides in the recap"
always\:"The newest pin on every turn\: each pin change while the cache is warm re-writes the whole conversation'\''s prompt cache"
never\:"Never\: the pin rides in the recap at the head of each message only"))' \
'--cache-ttl=[How long the prompt cache stays warm after a turn (the API'\''s default lifetime is 5m; 0s\: always cold; at most 24h)]:DURATION:_default' \
'--profile-tokens=[The profile'\''s budget, in estimated tokens\: the scope'\''s standing facts (all its facts when they fit) at the system-prompt tail, after the pin (0\: no profile)]:N:_default' \
'--warm-max=[At most this many claudes kept running on this host, over every session (the least recently used ends first)]:N:_default' \
'*--claude-arg=[An argument passed to claude for the main call (repeatable), e.g. --claude-arg=--add-dir=/src]:ARG:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--again[Send the session'\''s last failed message again, as a normal turn]' \
'--json[Print one JSON object instead of streaming the reply]' \
'(--json)--stream-json[JSON Lines as the turn happens\: start, each piece of text, each tool used, then done (the --json object) or error]' \
'(--no-direct-api)--direct-api[Send calls straight to the Messages API (needs ANTHROPIC_API_KEY)]' \
'--no-direct-api[Never fall back to the Messages API when claude is missing or not logged in]' \
'--no-extract[Skip pin and fact extraction (compaction still runs\: it guards the context size)]' \
'--no-compact[Never compact the session, however long it grows]' \
'--light[Run the main call on the lightweight flags (no tools, one model turn)]' \
'--wait-side[Wait (bounded by --side-timeout) for this turn'\''s side calls instead of leaving them to the detached worker]' \
'--no-user-setup[Run the main call without your MCP servers, hooks, skills and CLAUDE.md, as side calls always run (for a bot they only slow down)]' \
'--no-warm[Start claude afresh for every turn instead of keeping the session'\''s claude running between turns (in the per-host process \`duduclaw-session host\`)]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
'::message -- The message; absent or `-` reads stdin to EOF; after `--` it may start with `-`:_default' \
&& ret=0
;;
(store)
_arguments "${_arguments_options[@]}" : \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
":: :_duduclaw-session__subcmd__store_commands" \
"*::: :->store" \
&& ret=0

    case $state in
    (store)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-store-command-$line[1]:"
        case $line[1] in
            (copy)
_arguments "${_arguments_options[@]}" : \
'--to=[The store to copy into\: a file path or a postgres\:// URL \[default\: --db\]]:DB:_default' \
'--from=[The store to copy from\: a file path or a postgres\:// URL \[default\: --db\]]:DB:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--json[Print a JSON object with the counts]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(migrate)
_arguments "${_arguments_options[@]}" : \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_duduclaw-session__subcmd__store__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-store-help-command-$line[1]:"
        case $line[1] in
            (copy)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(migrate)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
;;
(forget)
_arguments "${_arguments_options[@]}" : \
'--user=[The person (\`--user\` of their turns)]:ID:_default' \
'--agent=[Only in this agent'\''s sessions and facts \[default\: every agent\]; no environment variable, so an exported DUDUCLAW_AGENT never narrows an erasure silently]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--dry-run[Count what would be erased, by place, and change nothing]' \
'--json[Print the counts as one JSON object]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(events)
_arguments "${_arguments_options[@]}" : \
'--since=[Only events after this id, or this recent (2h, 7d), or since this time (RFC 3339) \[default\: the newest --limit\]]:ID|DURATION|TIME:_default' \
'*--kind=[Only this kind, or a family ending in '\''.'\'' (fact.); repeatable]:KIND:_default' \
'--limit=[At most this many\: the oldest after --since, else the newest (with --follow\: how many of the newest to show first) \[default\: 20 without --since, all with it\]]:N:_default' \
'--agent=[Only this agent'\''s sessions]:ID:_default' \
'--channel=[With --agent\: only this channel'\''s session]:ID:_default' \
'--thread=[With --agent and --channel\: only this thread'\''s session]:ID:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'-f[Keep printing events as they are written, like tail -f]' \
'--follow[Keep printing events as they are written, like tail -f]' \
'--json[One JSON object per line]' \
'--all[The whole store, whatever --agent/--channel/--thread or their environment variables say]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
":: :_duduclaw-session__subcmd__events_commands" \
"*::: :->events" \
&& ret=0

    case $state in
    (events)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-events-command-$line[1]:"
        case $line[1] in
            (prune)
_arguments "${_arguments_options[@]}" : \
'--older-than=[How old, e.g. 30d, 12h]:DURATION:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_duduclaw-session__subcmd__events__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-events-help-command-$line[1]:"
        case $line[1] in
            (prune)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
;;
(stats)
_arguments "${_arguments_options[@]}" : \
'--agent=[Only this agent'\''s sessions]:ID:_default' \
'--channel=[With --agent\: only this channel'\''s session]:ID:_default' \
'--thread=[With --agent and --channel\: only this thread'\''s session]:ID:_default' \
'--since=[Only calls this recent, e.g. 7d, 12h]:DURATION:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--all[The whole store, whatever --agent/--channel/--thread or their environment variables say]' \
'--json[Print a JSON object with the same figures]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(doctor)
_arguments "${_arguments_options[@]}" : \
'--side-concurrency=[Side calls that run at once on this host, counted across every worker, \`jobs run\` and \`--wait-side\` turn (1 to 64)]:N:_default' \
'--db=[The store\: a SQLite file, or a PostgreSQL URL (postgres\://user\:pass@host/db?sslmode=require) that many hosts share \[default\: \$XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share\]]:PATH|URL:_default' \
'--claude=[The claude executable \[default\: \`claude\` on PATH\]]:PATH:_files' \
'--json[Print a JSON object]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(completions)
_arguments "${_arguments_options[@]}" : \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
':shell -- The shell to complete for:(bash elvish fish powershell zsh)' \
&& ret=0
;;
(man)
_arguments "${_arguments_options[@]}" : \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
'*::subcommand -- The subcommand whose page to print, e.g. `facts list` \[default\: the program'\''s page\]:_default' \
&& ret=0
;;
(host)
_arguments "${_arguments_options[@]}" : \
'--status[Print the claudes the running host keeps (JSON) instead of serving]' \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(schema)
_arguments "${_arguments_options[@]}" : \
'*-v[Log what happens to stderr (-vv for more)]' \
'*--verbose[Log what happens to stderr (-vv for more)]' \
'-q[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'--quiet[Draw no progress bar on a terminal (for \`facts import|enrich\`, \`store copy\`, \`jobs run\`); summaries and errors still print]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
'::name -- The output whose schema to print \[default\: list every output and the command that prints it\]:((turn\:"turn --json"
stream\:"Each line of turn --stream-json"
event\:"Each line of events --json"
facts\:"facts list --json"
facts-search\:"facts search --json"
facts-export\:"Each line of facts export"
facts-enrich\:"facts enrich --json"
sessions\:"sessions list --json"
session\:"sessions show --json"
jobs\:"jobs list --json"
stats\:"stats --json"
prompt\:"prompt --json"
history\:"history --json"
pin-history\:"pin history --json"
doctor\:"doctor --json"
store-copy\:"store copy --json"
forget\:"forget --json"))' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_duduclaw-session__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-help-command-$line[1]:"
        case $line[1] in
            (turn)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(id)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(pin)
_arguments "${_arguments_options[@]}" : \
":: :_duduclaw-session__subcmd__help__subcmd__pin_commands" \
"*::: :->pin" \
&& ret=0

    case $state in
    (pin)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-help-pin-command-$line[1]:"
        case $line[1] in
            (show)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(set)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(append)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(clear)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(history)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(restore)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
(facts)
_arguments "${_arguments_options[@]}" : \
":: :_duduclaw-session__subcmd__help__subcmd__facts_commands" \
"*::: :->facts" \
&& ret=0

    case $state in
    (facts)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-help-facts-command-$line[1]:"
        case $line[1] in
            (list)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(approve)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(reject)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(review)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(search)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(add)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(stand)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(forget)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(import)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(export)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(enrich)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
(history)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(sessions)
_arguments "${_arguments_options[@]}" : \
":: :_duduclaw-session__subcmd__help__subcmd__sessions_commands" \
"*::: :->sessions" \
&& ret=0

    case $state in
    (sessions)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-help-sessions-command-$line[1]:"
        case $line[1] in
            (list)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(show)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(rm)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(prune)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
(jobs)
_arguments "${_arguments_options[@]}" : \
":: :_duduclaw-session__subcmd__help__subcmd__jobs_commands" \
"*::: :->jobs" \
&& ret=0

    case $state in
    (jobs)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-help-jobs-command-$line[1]:"
        case $line[1] in
            (list)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(run)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(retry)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(work)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
(prompt)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(store)
_arguments "${_arguments_options[@]}" : \
":: :_duduclaw-session__subcmd__help__subcmd__store_commands" \
"*::: :->store" \
&& ret=0

    case $state in
    (store)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-help-store-command-$line[1]:"
        case $line[1] in
            (copy)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(migrate)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
(forget)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(events)
_arguments "${_arguments_options[@]}" : \
":: :_duduclaw-session__subcmd__help__subcmd__events_commands" \
"*::: :->events" \
&& ret=0

    case $state in
    (events)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:duduclaw-session-help-events-command-$line[1]:"
        case $line[1] in
            (prune)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
(stats)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(doctor)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(completions)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(man)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(host)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(schema)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
}

(( $+functions[_duduclaw-session_commands] )) ||
_duduclaw-session_commands() {
    local commands; commands=(
'turn:Run one turn\: send MESSAGE (or stdin) and print the reply as it arrives' \
'id:Print the session'\''s deterministic id' \
'pin:Read or edit the session'\''s pinned task' \
'facts:List, search and edit an agent'\''s key facts' \
'history:Show a session'\''s stored turns, failed ones with their reason' \
'sessions:Inspect and remove stored sessions' \
'jobs:The side-call jobs (pin, facts, summaries)\: list, run, retry' \
'prompt:Dry run\: print exactly what \`turn\` would send, without calling or writing anything' \
'store:Move a store between engines (a SQLite file and a PostgreSQL server), or migrate it' \
'forget:Erase a person\: their facts, their messages and the replies to them (as tombstones), pin revisions, summaries and side-call jobs that quote them, and claude'\''s transcripts of the sessions touched' \
'events:The memory'\''s event feed\: turns, pins, facts, compactions, failed side calls, drift and corrections, one per line' \
'stats:What the conversations cost\: tokens, cache reads, side calls'\'' share, injected memory' \
'doctor:Check claude, the Messages API and the store, and say what is wrong' \
'completions:Print a shell completion script' \
'man:Print the man page (roff) of the program, or of a subcommand\: \`man facts list\`' \
'host:The per-host process that keeps the sessions'\'' claudes running between turns, started by a turn (not for people)' \
'schema:Print the JSON Schema (draft 2020-12) of a JSON output, or list the outputs\: \`schema turn\`' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__completions_commands] )) ||
_duduclaw-session__subcmd__completions_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session completions commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__doctor_commands] )) ||
_duduclaw-session__subcmd__doctor_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session doctor commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__events_commands] )) ||
_duduclaw-session__subcmd__events_commands() {
    local commands; commands=(
'prune:Delete events older than a duration, to bound the log' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session events commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__events__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__events__subcmd__help_commands() {
    local commands; commands=(
'prune:Delete events older than a duration, to bound the log' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session events help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__events__subcmd__help__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__events__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session events help help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__events__subcmd__help__subcmd__prune_commands] )) ||
_duduclaw-session__subcmd__events__subcmd__help__subcmd__prune_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session events help prune commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__events__subcmd__prune_commands] )) ||
_duduclaw-session__subcmd__events__subcmd__prune_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session events prune commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts_commands] )) ||
_duduclaw-session__subcmd__facts_commands() {
    local commands; commands=(
'list:List the facts, most used first\: id, uses, who said it (- for agent-wide), how it came, text' \
'approve:Make facts that wait for review live\: the profile and the facts a turn injects may carry them' \
'reject:Delete facts that wait for review, leaving nothing recoverable in the store' \
'review:Whether the agent'\''s new standing facts wait for review (\`facts approve\`); with on or off, set it' \
'search:Rank facts against a query, as a turn would' \
'add:Add a fact by hand and print its id' \
'stand:Mark facts standing (the profile carries them in every conversation), or with --clear not' \
'forget:Delete facts by id (from \`facts list\`), leaving nothing recoverable in the store' \
'import:Import facts from JSON Lines; duplicates and secrets are skipped, a bad line imports nothing' \
'export:Export the agent'\''s facts as JSON Lines (with --user\: that person'\''s and the agent-wide ones)' \
'enrich:Write search keywords for facts that have none (imported or older facts), by batched side calls' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session facts commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__add_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__add_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts add commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__approve_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__approve_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts approve commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__enrich_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__enrich_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts enrich commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__export_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__export_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts export commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__forget_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__forget_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts forget commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__help_commands() {
    local commands; commands=(
'list:List the facts, most used first\: id, uses, who said it (- for agent-wide), how it came, text' \
'approve:Make facts that wait for review live\: the profile and the facts a turn injects may carry them' \
'reject:Delete facts that wait for review, leaving nothing recoverable in the store' \
'review:Whether the agent'\''s new standing facts wait for review (\`facts approve\`); with on or off, set it' \
'search:Rank facts against a query, as a turn would' \
'add:Add a fact by hand and print its id' \
'stand:Mark facts standing (the profile carries them in every conversation), or with --clear not' \
'forget:Delete facts by id (from \`facts list\`), leaving nothing recoverable in the store' \
'import:Import facts from JSON Lines; duplicates and secrets are skipped, a bad line imports nothing' \
'export:Export the agent'\''s facts as JSON Lines (with --user\: that person'\''s and the agent-wide ones)' \
'enrich:Write search keywords for facts that have none (imported or older facts), by batched side calls' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session facts help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__help__subcmd__add_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__help__subcmd__add_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts help add commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__help__subcmd__approve_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__help__subcmd__approve_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts help approve commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__help__subcmd__enrich_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__help__subcmd__enrich_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts help enrich commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__help__subcmd__export_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__help__subcmd__export_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts help export commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__help__subcmd__forget_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__help__subcmd__forget_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts help forget commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__help__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts help help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__help__subcmd__import_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__help__subcmd__import_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts help import commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__help__subcmd__list_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__help__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts help list commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__help__subcmd__reject_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__help__subcmd__reject_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts help reject commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__help__subcmd__review_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__help__subcmd__review_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts help review commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__help__subcmd__search_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__help__subcmd__search_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts help search commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__help__subcmd__stand_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__help__subcmd__stand_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts help stand commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__import_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__import_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts import commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__list_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts list commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__reject_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__reject_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts reject commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__review_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__review_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts review commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__search_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__search_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts search commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__facts__subcmd__stand_commands] )) ||
_duduclaw-session__subcmd__facts__subcmd__stand_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session facts stand commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__forget_commands] )) ||
_duduclaw-session__subcmd__forget_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session forget commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__help_commands() {
    local commands; commands=(
'turn:Run one turn\: send MESSAGE (or stdin) and print the reply as it arrives' \
'id:Print the session'\''s deterministic id' \
'pin:Read or edit the session'\''s pinned task' \
'facts:List, search and edit an agent'\''s key facts' \
'history:Show a session'\''s stored turns, failed ones with their reason' \
'sessions:Inspect and remove stored sessions' \
'jobs:The side-call jobs (pin, facts, summaries)\: list, run, retry' \
'prompt:Dry run\: print exactly what \`turn\` would send, without calling or writing anything' \
'store:Move a store between engines (a SQLite file and a PostgreSQL server), or migrate it' \
'forget:Erase a person\: their facts, their messages and the replies to them (as tombstones), pin revisions, summaries and side-call jobs that quote them, and claude'\''s transcripts of the sessions touched' \
'events:The memory'\''s event feed\: turns, pins, facts, compactions, failed side calls, drift and corrections, one per line' \
'stats:What the conversations cost\: tokens, cache reads, side calls'\'' share, injected memory' \
'doctor:Check claude, the Messages API and the store, and say what is wrong' \
'completions:Print a shell completion script' \
'man:Print the man page (roff) of the program, or of a subcommand\: \`man facts list\`' \
'host:The per-host process that keeps the sessions'\'' claudes running between turns, started by a turn (not for people)' \
'schema:Print the JSON Schema (draft 2020-12) of a JSON output, or list the outputs\: \`schema turn\`' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__completions_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__completions_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help completions commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__doctor_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__doctor_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help doctor commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__events_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__events_commands() {
    local commands; commands=(
'prune:Delete events older than a duration, to bound the log' \
    )
    _describe -t commands 'duduclaw-session help events commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__events__subcmd__prune_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__events__subcmd__prune_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help events prune commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__facts_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__facts_commands() {
    local commands; commands=(
'list:List the facts, most used first\: id, uses, who said it (- for agent-wide), how it came, text' \
'approve:Make facts that wait for review live\: the profile and the facts a turn injects may carry them' \
'reject:Delete facts that wait for review, leaving nothing recoverable in the store' \
'review:Whether the agent'\''s new standing facts wait for review (\`facts approve\`); with on or off, set it' \
'search:Rank facts against a query, as a turn would' \
'add:Add a fact by hand and print its id' \
'stand:Mark facts standing (the profile carries them in every conversation), or with --clear not' \
'forget:Delete facts by id (from \`facts list\`), leaving nothing recoverable in the store' \
'import:Import facts from JSON Lines; duplicates and secrets are skipped, a bad line imports nothing' \
'export:Export the agent'\''s facts as JSON Lines (with --user\: that person'\''s and the agent-wide ones)' \
'enrich:Write search keywords for facts that have none (imported or older facts), by batched side calls' \
    )
    _describe -t commands 'duduclaw-session help facts commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__facts__subcmd__add_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__facts__subcmd__add_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help facts add commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__facts__subcmd__approve_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__facts__subcmd__approve_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help facts approve commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__facts__subcmd__enrich_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__facts__subcmd__enrich_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help facts enrich commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__facts__subcmd__export_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__facts__subcmd__export_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help facts export commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__facts__subcmd__forget_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__facts__subcmd__forget_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help facts forget commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__facts__subcmd__import_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__facts__subcmd__import_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help facts import commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__facts__subcmd__list_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__facts__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help facts list commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__facts__subcmd__reject_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__facts__subcmd__reject_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help facts reject commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__facts__subcmd__review_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__facts__subcmd__review_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help facts review commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__facts__subcmd__search_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__facts__subcmd__search_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help facts search commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__facts__subcmd__stand_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__facts__subcmd__stand_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help facts stand commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__forget_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__forget_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help forget commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__history_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__history_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help history commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__host_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__host_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help host commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__id_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__id_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help id commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__jobs_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__jobs_commands() {
    local commands; commands=(
'list:List open, failed and recently finished jobs\: id, kind, status, attempts, session, error, why it waits' \
'run:Run the runnable jobs now, in the foreground (e.g. from cron), and print a summary' \
'retry:Make a job runnable again, with a fresh set of attempts' \
'work:The detached worker a turn starts (not for people)' \
    )
    _describe -t commands 'duduclaw-session help jobs commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__jobs__subcmd__list_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__jobs__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help jobs list commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__jobs__subcmd__retry_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__jobs__subcmd__retry_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help jobs retry commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__jobs__subcmd__run_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__jobs__subcmd__run_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help jobs run commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__jobs__subcmd__work_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__jobs__subcmd__work_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help jobs work commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__man_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__man_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help man commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__pin_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__pin_commands() {
    local commands; commands=(
'show:Print the pinned task (nothing if there is none)' \
'set:Replace the pinned task (at most 1,000 characters)' \
'append:Add your words as a \`\[+\]\` line to the pinned task, verbatim (the pin stays within 1,000 characters)' \
'clear:Remove the pinned task' \
'history:List the pin'\''s kept revisions, oldest first\: revision, time, source (turn), pin' \
'restore:Bring back a kept revision of the pin (\`pin history\` lists them)' \
    )
    _describe -t commands 'duduclaw-session help pin commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__pin__subcmd__append_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__pin__subcmd__append_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help pin append commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__pin__subcmd__clear_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__pin__subcmd__clear_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help pin clear commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__pin__subcmd__history_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__pin__subcmd__history_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help pin history commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__pin__subcmd__restore_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__pin__subcmd__restore_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help pin restore commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__pin__subcmd__set_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__pin__subcmd__set_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help pin set commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__pin__subcmd__show_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__pin__subcmd__show_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help pin show commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__prompt_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__prompt_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help prompt commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__schema_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__schema_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help schema commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__sessions_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__sessions_commands() {
    local commands; commands=(
'list:List sessions (id, agent, channel, thread, turns, last used), most recently used first' \
'show:Show one session\: key, handle, pin, summary, size, pending side calls' \
'rm:Delete sessions by id\: their turns, pin, jobs and claude'\''s transcripts, leaving nothing recoverable' \
'prune:Delete (as \`rm\` does) sessions not used for longer than a duration; prints their ids' \
    )
    _describe -t commands 'duduclaw-session help sessions commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__sessions__subcmd__list_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__sessions__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help sessions list commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__sessions__subcmd__prune_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__sessions__subcmd__prune_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help sessions prune commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__sessions__subcmd__rm_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__sessions__subcmd__rm_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help sessions rm commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__sessions__subcmd__show_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__sessions__subcmd__show_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help sessions show commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__stats_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__stats_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help stats commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__store_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__store_commands() {
    local commands; commands=(
'copy:Copy sessions (pins, summaries, history) and facts into another store' \
'migrate:Bring the store to this build'\''s schema, and do nothing else' \
    )
    _describe -t commands 'duduclaw-session help store commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__store__subcmd__copy_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__store__subcmd__copy_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help store copy commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__store__subcmd__migrate_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__store__subcmd__migrate_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help store migrate commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__help__subcmd__turn_commands] )) ||
_duduclaw-session__subcmd__help__subcmd__turn_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session help turn commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__history_commands] )) ||
_duduclaw-session__subcmd__history_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session history commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__host_commands] )) ||
_duduclaw-session__subcmd__host_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session host commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__id_commands] )) ||
_duduclaw-session__subcmd__id_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session id commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__jobs_commands] )) ||
_duduclaw-session__subcmd__jobs_commands() {
    local commands; commands=(
'list:List open, failed and recently finished jobs\: id, kind, status, attempts, session, error, why it waits' \
'run:Run the runnable jobs now, in the foreground (e.g. from cron), and print a summary' \
'retry:Make a job runnable again, with a fresh set of attempts' \
'work:The detached worker a turn starts (not for people)' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session jobs commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__jobs__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__jobs__subcmd__help_commands() {
    local commands; commands=(
'list:List open, failed and recently finished jobs\: id, kind, status, attempts, session, error, why it waits' \
'run:Run the runnable jobs now, in the foreground (e.g. from cron), and print a summary' \
'retry:Make a job runnable again, with a fresh set of attempts' \
'work:The detached worker a turn starts (not for people)' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session jobs help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__jobs__subcmd__help__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__jobs__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session jobs help help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__jobs__subcmd__help__subcmd__list_commands] )) ||
_duduclaw-session__subcmd__jobs__subcmd__help__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session jobs help list commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__jobs__subcmd__help__subcmd__retry_commands] )) ||
_duduclaw-session__subcmd__jobs__subcmd__help__subcmd__retry_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session jobs help retry commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__jobs__subcmd__help__subcmd__run_commands] )) ||
_duduclaw-session__subcmd__jobs__subcmd__help__subcmd__run_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session jobs help run commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__jobs__subcmd__help__subcmd__work_commands] )) ||
_duduclaw-session__subcmd__jobs__subcmd__help__subcmd__work_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session jobs help work commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__jobs__subcmd__list_commands] )) ||
_duduclaw-session__subcmd__jobs__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session jobs list commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__jobs__subcmd__retry_commands] )) ||
_duduclaw-session__subcmd__jobs__subcmd__retry_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session jobs retry commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__jobs__subcmd__run_commands] )) ||
_duduclaw-session__subcmd__jobs__subcmd__run_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session jobs run commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__jobs__subcmd__work_commands] )) ||
_duduclaw-session__subcmd__jobs__subcmd__work_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session jobs work commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__man_commands] )) ||
_duduclaw-session__subcmd__man_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session man commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin_commands] )) ||
_duduclaw-session__subcmd__pin_commands() {
    local commands; commands=(
'show:Print the pinned task (nothing if there is none)' \
'set:Replace the pinned task (at most 1,000 characters)' \
'append:Add your words as a \`\[+\]\` line to the pinned task, verbatim (the pin stays within 1,000 characters)' \
'clear:Remove the pinned task' \
'history:List the pin'\''s kept revisions, oldest first\: revision, time, source (turn), pin' \
'restore:Bring back a kept revision of the pin (\`pin history\` lists them)' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session pin commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__append_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__append_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session pin append commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__clear_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__clear_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session pin clear commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__help_commands() {
    local commands; commands=(
'show:Print the pinned task (nothing if there is none)' \
'set:Replace the pinned task (at most 1,000 characters)' \
'append:Add your words as a \`\[+\]\` line to the pinned task, verbatim (the pin stays within 1,000 characters)' \
'clear:Remove the pinned task' \
'history:List the pin'\''s kept revisions, oldest first\: revision, time, source (turn), pin' \
'restore:Bring back a kept revision of the pin (\`pin history\` lists them)' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session pin help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__help__subcmd__append_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__help__subcmd__append_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session pin help append commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__help__subcmd__clear_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__help__subcmd__clear_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session pin help clear commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__help__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session pin help help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__help__subcmd__history_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__help__subcmd__history_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session pin help history commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__help__subcmd__restore_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__help__subcmd__restore_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session pin help restore commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__help__subcmd__set_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__help__subcmd__set_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session pin help set commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__help__subcmd__show_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__help__subcmd__show_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session pin help show commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__history_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__history_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session pin history commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__restore_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__restore_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session pin restore commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__set_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__set_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session pin set commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__pin__subcmd__show_commands] )) ||
_duduclaw-session__subcmd__pin__subcmd__show_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session pin show commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__prompt_commands] )) ||
_duduclaw-session__subcmd__prompt_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session prompt commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__schema_commands] )) ||
_duduclaw-session__subcmd__schema_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session schema commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__sessions_commands] )) ||
_duduclaw-session__subcmd__sessions_commands() {
    local commands; commands=(
'list:List sessions (id, agent, channel, thread, turns, last used), most recently used first' \
'show:Show one session\: key, handle, pin, summary, size, pending side calls' \
'rm:Delete sessions by id\: their turns, pin, jobs and claude'\''s transcripts, leaving nothing recoverable' \
'prune:Delete (as \`rm\` does) sessions not used for longer than a duration; prints their ids' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session sessions commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__sessions__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__sessions__subcmd__help_commands() {
    local commands; commands=(
'list:List sessions (id, agent, channel, thread, turns, last used), most recently used first' \
'show:Show one session\: key, handle, pin, summary, size, pending side calls' \
'rm:Delete sessions by id\: their turns, pin, jobs and claude'\''s transcripts, leaving nothing recoverable' \
'prune:Delete (as \`rm\` does) sessions not used for longer than a duration; prints their ids' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session sessions help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__sessions__subcmd__help__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__sessions__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session sessions help help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__sessions__subcmd__help__subcmd__list_commands] )) ||
_duduclaw-session__subcmd__sessions__subcmd__help__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session sessions help list commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__sessions__subcmd__help__subcmd__prune_commands] )) ||
_duduclaw-session__subcmd__sessions__subcmd__help__subcmd__prune_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session sessions help prune commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__sessions__subcmd__help__subcmd__rm_commands] )) ||
_duduclaw-session__subcmd__sessions__subcmd__help__subcmd__rm_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session sessions help rm commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__sessions__subcmd__help__subcmd__show_commands] )) ||
_duduclaw-session__subcmd__sessions__subcmd__help__subcmd__show_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session sessions help show commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__sessions__subcmd__list_commands] )) ||
_duduclaw-session__subcmd__sessions__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session sessions list commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__sessions__subcmd__prune_commands] )) ||
_duduclaw-session__subcmd__sessions__subcmd__prune_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session sessions prune commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__sessions__subcmd__rm_commands] )) ||
_duduclaw-session__subcmd__sessions__subcmd__rm_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session sessions rm commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__sessions__subcmd__show_commands] )) ||
_duduclaw-session__subcmd__sessions__subcmd__show_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session sessions show commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__stats_commands] )) ||
_duduclaw-session__subcmd__stats_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session stats commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__store_commands] )) ||
_duduclaw-session__subcmd__store_commands() {
    local commands; commands=(
'copy:Copy sessions (pins, summaries, history) and facts into another store' \
'migrate:Bring the store to this build'\''s schema, and do nothing else' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session store commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__store__subcmd__copy_commands] )) ||
_duduclaw-session__subcmd__store__subcmd__copy_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session store copy commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__store__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__store__subcmd__help_commands() {
    local commands; commands=(
'copy:Copy sessions (pins, summaries, history) and facts into another store' \
'migrate:Bring the store to this build'\''s schema, and do nothing else' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'duduclaw-session store help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__store__subcmd__help__subcmd__copy_commands] )) ||
_duduclaw-session__subcmd__store__subcmd__help__subcmd__copy_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session store help copy commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__store__subcmd__help__subcmd__help_commands] )) ||
_duduclaw-session__subcmd__store__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session store help help commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__store__subcmd__help__subcmd__migrate_commands] )) ||
_duduclaw-session__subcmd__store__subcmd__help__subcmd__migrate_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session store help migrate commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__store__subcmd__migrate_commands] )) ||
_duduclaw-session__subcmd__store__subcmd__migrate_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session store migrate commands' commands "$@"
}
(( $+functions[_duduclaw-session__subcmd__turn_commands] )) ||
_duduclaw-session__subcmd__turn_commands() {
    local commands; commands=()
    _describe -t commands 'duduclaw-session turn commands' commands "$@"
}

if [ "$funcstack[1]" = "_duduclaw-session" ]; then
    _duduclaw-session "$@"
else
    compdef _duduclaw-session duduclaw-session
fi
