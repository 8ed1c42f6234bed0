
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'duduclaw-session' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'duduclaw-session'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'duduclaw-session' {
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('turn', 'turn', [CompletionResultType]::ParameterValue, 'Run one turn: send MESSAGE (or stdin) and print the reply as it arrives')
            [CompletionResult]::new('id', 'id', [CompletionResultType]::ParameterValue, 'Print the session''s deterministic id')
            [CompletionResult]::new('pin', 'pin', [CompletionResultType]::ParameterValue, 'Read or edit the session''s pinned task')
            [CompletionResult]::new('facts', 'facts', [CompletionResultType]::ParameterValue, 'List, search and edit an agent''s key facts')
            [CompletionResult]::new('history', 'history', [CompletionResultType]::ParameterValue, 'Show a session''s stored turns, failed ones with their reason')
            [CompletionResult]::new('sessions', 'sessions', [CompletionResultType]::ParameterValue, 'Inspect and remove stored sessions')
            [CompletionResult]::new('jobs', 'jobs', [CompletionResultType]::ParameterValue, 'The side-call jobs (pin, facts, summaries): list, run, retry')
            [CompletionResult]::new('prompt', 'prompt', [CompletionResultType]::ParameterValue, 'Dry run: print exactly what `turn` would send, without calling or writing anything')
            [CompletionResult]::new('store', 'store', [CompletionResultType]::ParameterValue, 'Move a store between engines (a SQLite file and a PostgreSQL server), or migrate it')
            [CompletionResult]::new('forget', 'forget', [CompletionResultType]::ParameterValue, 'Erase a person: their facts, their messages and the replies to them (as tombstones), pin revisions, summaries and side-call jobs that quote them, and claude''s transcripts of the sessions touched')
            [CompletionResult]::new('events', 'events', [CompletionResultType]::ParameterValue, 'The memory''s event feed: turns, pins, facts, compactions, failed side calls, drift and corrections, one per line')
            [CompletionResult]::new('stats', 'stats', [CompletionResultType]::ParameterValue, 'What the conversations cost: tokens, cache reads, side calls'' share, injected memory')
            [CompletionResult]::new('doctor', 'doctor', [CompletionResultType]::ParameterValue, 'Check claude, the Messages API and the store, and say what is wrong')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Print the man page (roff) of the program, or of a subcommand: `man facts list`')
            [CompletionResult]::new('host', 'host', [CompletionResultType]::ParameterValue, 'The per-host process that keeps the sessions'' claudes running between turns, started by a turn (not for people)')
            [CompletionResult]::new('schema', 'schema', [CompletionResultType]::ParameterValue, 'Print the JSON Schema (draft 2020-12) of a JSON output, or list the outputs: `schema turn`')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;turn' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent (bot, persona) this conversation belongs to [required]')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'The channel (chat, room, terminal) of the conversation [required]')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'An optional thread inside the channel')
            [CompletionResult]::new('--attach', '--attach', [CompletionResultType]::ParameterName, 'A file to send with the message (repeatable): a PNG, JPEG, GIF or WebP image, a PDF, or UTF-8 text (a log, code, CSV), by its bytes; `-` reads it from stdin when the message is an argument')
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'Model for the main call (passed to claude --model)')
            [CompletionResult]::new('--extract-model', '--extract-model', [CompletionResultType]::ParameterName, 'Model for the side calls (pin, facts, summaries, keywords) whose job does not name one')
            [CompletionResult]::new('--side-timeout', '--side-timeout', [CompletionResultType]::ParameterName, 'Bound on each side call (seconds, or e.g. 45s, 2m; at most 1h): the time it runs or waits on the network; time a loaded host keeps it waiting for a CPU is not counted, up to 4 times the bound in all')
            [CompletionResult]::new('--side-concurrency', '--side-concurrency', [CompletionResultType]::ParameterName, 'Side calls that run at once on this host, counted across every worker, `jobs run` and `--wait-side` turn (1 to 64)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Give up on the main call after this long (seconds, or e.g. 90s, 10m; at most 24h)')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'Scope facts to one person as well as the agent')
            [CompletionResult]::new('--compact-at', '--compact-at', [CompletionResultType]::ParameterName, 'Compact the session when its context passes this many estimated tokens')
            [CompletionResult]::new('--facts-in', '--facts-in', [CompletionResultType]::ParameterName, 'Where the injected facts go')
            [CompletionResult]::new('--memory-every', '--memory-every', [CompletionResultType]::ParameterName, 'Run the memory side call (facts, corrections, clarifications, drift) once this many substantive exchanges wait (1: after each; a pause past --cache-ttl, a compaction and `jobs run` run it sooner)')
            [CompletionResult]::new('--system-pin', '--system-pin', [CompletionResultType]::ParameterName, 'When the pin goes at the system-prompt tail (the recap always carries the newest pin)')
            [CompletionResult]::new('--cache-ttl', '--cache-ttl', [CompletionResultType]::ParameterName, 'How long the prompt cache stays warm after a turn (the API''s default lifetime is 5m; 0s: always cold; at most 24h)')
            [CompletionResult]::new('--profile-tokens', '--profile-tokens', [CompletionResultType]::ParameterName, 'The profile''s budget, in estimated tokens: the scope''s standing facts (all its facts when they fit) at the system-prompt tail, after the pin (0: no profile)')
            [CompletionResult]::new('--warm-max', '--warm-max', [CompletionResultType]::ParameterName, 'At most this many claudes kept running on this host, over every session (the least recently used ends first)')
            [CompletionResult]::new('--claude-arg', '--claude-arg', [CompletionResultType]::ParameterName, 'An argument passed to claude for the main call (repeatable), e.g. --claude-arg=--add-dir=/src')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--again', '--again', [CompletionResultType]::ParameterName, 'Send the session''s last failed message again, as a normal turn')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object instead of streaming the reply')
            [CompletionResult]::new('--stream-json', '--stream-json', [CompletionResultType]::ParameterName, 'JSON Lines as the turn happens: start, each piece of text, each tool used, then done (the --json object) or error')
            [CompletionResult]::new('--direct-api', '--direct-api', [CompletionResultType]::ParameterName, 'Send calls straight to the Messages API (needs ANTHROPIC_API_KEY)')
            [CompletionResult]::new('--no-direct-api', '--no-direct-api', [CompletionResultType]::ParameterName, 'Never fall back to the Messages API when claude is missing or not logged in')
            [CompletionResult]::new('--no-extract', '--no-extract', [CompletionResultType]::ParameterName, 'Skip pin and fact extraction (compaction still runs: it guards the context size)')
            [CompletionResult]::new('--no-compact', '--no-compact', [CompletionResultType]::ParameterName, 'Never compact the session, however long it grows')
            [CompletionResult]::new('--light', '--light', [CompletionResultType]::ParameterName, 'Run the main call on the lightweight flags (no tools, one model turn)')
            [CompletionResult]::new('--wait-side', '--wait-side', [CompletionResultType]::ParameterName, 'Wait (bounded by --side-timeout) for this turn''s side calls instead of leaving them to the detached worker')
            [CompletionResult]::new('--no-user-setup', '--no-user-setup', [CompletionResultType]::ParameterName, 'Run the main call without your MCP servers, hooks, skills and CLAUDE.md, as side calls always run (for a bot they only slow down)')
            [CompletionResult]::new('--no-warm', '--no-warm', [CompletionResultType]::ParameterName, 'Start claude afresh for every turn instead of keeping the session''s claude running between turns (in the per-host process `duduclaw-session host`)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'duduclaw-session;id' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent (bot, persona) this conversation belongs to [required]')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'The channel (chat, room, terminal) of the conversation [required]')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'An optional thread inside the channel')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;pin' {
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Print the pinned task (nothing if there is none)')
            [CompletionResult]::new('set', 'set', [CompletionResultType]::ParameterValue, 'Replace the pinned task (at most 1,000 characters)')
            [CompletionResult]::new('append', 'append', [CompletionResultType]::ParameterValue, 'Add your words as a `[+]` line to the pinned task, verbatim (the pin stays within 1,000 characters)')
            [CompletionResult]::new('clear', 'clear', [CompletionResultType]::ParameterValue, 'Remove the pinned task')
            [CompletionResult]::new('history', 'history', [CompletionResultType]::ParameterValue, 'List the pin''s kept revisions, oldest first: revision, time, source (turn), pin')
            [CompletionResult]::new('restore', 'restore', [CompletionResultType]::ParameterValue, 'Bring back a kept revision of the pin (`pin history` lists them)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;pin;show' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent (bot, persona) this conversation belongs to [required]')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'The channel (chat, room, terminal) of the conversation [required]')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'An optional thread inside the channel')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;pin;set' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent (bot, persona) this conversation belongs to [required]')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'The channel (chat, room, terminal) of the conversation [required]')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'An optional thread inside the channel')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;pin;append' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent (bot, persona) this conversation belongs to [required]')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'The channel (chat, room, terminal) of the conversation [required]')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'An optional thread inside the channel')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;pin;clear' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent (bot, persona) this conversation belongs to [required]')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'The channel (chat, room, terminal) of the conversation [required]')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'An optional thread inside the channel')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;pin;history' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent (bot, persona) this conversation belongs to [required]')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'The channel (chat, room, terminal) of the conversation [required]')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'An optional thread inside the channel')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON array of revisions (rev, pin, source, turn_id, from_rev, created_at)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;pin;restore' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent (bot, persona) this conversation belongs to [required]')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'The channel (chat, room, terminal) of the conversation [required]')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'An optional thread inside the channel')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;pin;help' {
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Print the pinned task (nothing if there is none)')
            [CompletionResult]::new('set', 'set', [CompletionResultType]::ParameterValue, 'Replace the pinned task (at most 1,000 characters)')
            [CompletionResult]::new('append', 'append', [CompletionResultType]::ParameterValue, 'Add your words as a `[+]` line to the pinned task, verbatim (the pin stays within 1,000 characters)')
            [CompletionResult]::new('clear', 'clear', [CompletionResultType]::ParameterValue, 'Remove the pinned task')
            [CompletionResult]::new('history', 'history', [CompletionResultType]::ParameterValue, 'List the pin''s kept revisions, oldest first: revision, time, source (turn), pin')
            [CompletionResult]::new('restore', 'restore', [CompletionResultType]::ParameterValue, 'Bring back a kept revision of the pin (`pin history` lists them)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;pin;help;show' {
            break
        }
        'duduclaw-session;pin;help;set' {
            break
        }
        'duduclaw-session;pin;help;append' {
            break
        }
        'duduclaw-session;pin;help;clear' {
            break
        }
        'duduclaw-session;pin;help;history' {
            break
        }
        'duduclaw-session;pin;help;restore' {
            break
        }
        'duduclaw-session;pin;help;help' {
            break
        }
        'duduclaw-session;facts' {
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the facts, most used first: id, uses, who said it (- for agent-wide), how it came, text')
            [CompletionResult]::new('approve', 'approve', [CompletionResultType]::ParameterValue, 'Make facts that wait for review live: the profile and the facts a turn injects may carry them')
            [CompletionResult]::new('reject', 'reject', [CompletionResultType]::ParameterValue, 'Delete facts that wait for review, leaving nothing recoverable in the store')
            [CompletionResult]::new('review', 'review', [CompletionResultType]::ParameterValue, 'Whether the agent''s new standing facts wait for review (`facts approve`); with on or off, set it')
            [CompletionResult]::new('search', 'search', [CompletionResultType]::ParameterValue, 'Rank facts against a query, as a turn would')
            [CompletionResult]::new('add', 'add', [CompletionResultType]::ParameterValue, 'Add a fact by hand and print its id')
            [CompletionResult]::new('stand', 'stand', [CompletionResultType]::ParameterValue, 'Mark facts standing (the profile carries them in every conversation), or with --clear not')
            [CompletionResult]::new('forget', 'forget', [CompletionResultType]::ParameterValue, 'Delete facts by id (from `facts list`), leaving nothing recoverable in the store')
            [CompletionResult]::new('import', 'import', [CompletionResultType]::ParameterValue, 'Import facts from JSON Lines; duplicates and secrets are skipped, a bad line imports nothing')
            [CompletionResult]::new('export', 'export', [CompletionResultType]::ParameterValue, 'Export the agent''s facts as JSON Lines (with --user: that person''s and the agent-wide ones)')
            [CompletionResult]::new('enrich', 'enrich', [CompletionResultType]::ParameterValue, 'Write search keywords for facts that have none (imported or older facts), by batched side calls')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;facts;list' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent whose facts these are [required]')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'One person: reads include their facts with the agent-wide ones; writes store facts for them only')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Show at most N facts')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON array of objects (id, content, user, session_id, source_turn, origin, held, ...)')
            [CompletionResult]::new('--pending', '--pending', [CompletionResultType]::ParameterName, 'The facts waiting for review instead, oldest first (they ride in no prompt)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;facts;approve' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent whose facts these are [required]')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'One person: reads include their facts with the agent-wide ones; writes store facts for them only')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;facts;reject' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent whose facts these are [required]')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'One person: reads include their facts with the agent-wide ones; writes store facts for them only')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;facts;review' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent [required]')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'duduclaw-session;facts;search' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent whose facts these are [required]')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'One person: reads include their facts with the agent-wide ones; writes store facts for them only')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Show at most N facts')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON array of objects (id, content, access_count, score, ...)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;facts;add' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent whose facts these are [required]')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'One person: reads include their facts with the agent-wide ones; writes store facts for them only')
            [CompletionResult]::new('--keywords', '--keywords', [CompletionResultType]::ParameterName, 'Search keywords, comma-separated: words people may ask with (synonyms, the other language''s terms)')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--standing', '--standing', [CompletionResultType]::ParameterName, 'A standing fact: it matters whatever the conversation is about (health, allergies, family, hard rules, fixed schedules), so the profile carries it in every conversation''s system prompt')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;facts;stand' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent whose facts these are [required]')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'One person: reads include their facts with the agent-wide ones; writes store facts for them only')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--clear', '--clear', [CompletionResultType]::ParameterName, 'Take the mark off instead')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;facts;forget' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent whose facts these are [required]')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'One person: reads include their facts with the agent-wide ones; writes store facts for them only')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;facts;import' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent whose facts these are [required]')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'One person: reads include their facts with the agent-wide ones; writes store facts for them only')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;facts;export' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent whose facts these are [required]')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'One person: reads include their facts with the agent-wide ones; writes store facts for them only')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;facts;enrich' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent whose facts to enrich')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Enrich at most N facts in this run')
            [CompletionResult]::new('--extract-model', '--extract-model', [CompletionResultType]::ParameterName, 'Model for the side calls (pin, facts, summaries, keywords) whose job does not name one')
            [CompletionResult]::new('--side-timeout', '--side-timeout', [CompletionResultType]::ParameterName, 'Bound on each side call (seconds, or e.g. 45s, 2m; at most 1h): the time it runs or waits on the network; time a loaded host keeps it waiting for a CPU is not counted, up to 4 times the bound in all')
            [CompletionResult]::new('--side-concurrency', '--side-concurrency', [CompletionResultType]::ParameterName, 'Side calls that run at once on this host, counted across every worker, `jobs run` and `--wait-side` turn (1 to 64)')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'Every agent''s facts (instead of --agent''s)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON summary (facts enriched and left, jobs, cost)')
            [CompletionResult]::new('--direct-api', '--direct-api', [CompletionResultType]::ParameterName, 'Send calls straight to the Messages API (needs ANTHROPIC_API_KEY)')
            [CompletionResult]::new('--no-direct-api', '--no-direct-api', [CompletionResultType]::ParameterName, 'Never fall back to the Messages API when claude is missing or not logged in')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'duduclaw-session;facts;help' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the facts, most used first: id, uses, who said it (- for agent-wide), how it came, text')
            [CompletionResult]::new('approve', 'approve', [CompletionResultType]::ParameterValue, 'Make facts that wait for review live: the profile and the facts a turn injects may carry them')
            [CompletionResult]::new('reject', 'reject', [CompletionResultType]::ParameterValue, 'Delete facts that wait for review, leaving nothing recoverable in the store')
            [CompletionResult]::new('review', 'review', [CompletionResultType]::ParameterValue, 'Whether the agent''s new standing facts wait for review (`facts approve`); with on or off, set it')
            [CompletionResult]::new('search', 'search', [CompletionResultType]::ParameterValue, 'Rank facts against a query, as a turn would')
            [CompletionResult]::new('add', 'add', [CompletionResultType]::ParameterValue, 'Add a fact by hand and print its id')
            [CompletionResult]::new('stand', 'stand', [CompletionResultType]::ParameterValue, 'Mark facts standing (the profile carries them in every conversation), or with --clear not')
            [CompletionResult]::new('forget', 'forget', [CompletionResultType]::ParameterValue, 'Delete facts by id (from `facts list`), leaving nothing recoverable in the store')
            [CompletionResult]::new('import', 'import', [CompletionResultType]::ParameterValue, 'Import facts from JSON Lines; duplicates and secrets are skipped, a bad line imports nothing')
            [CompletionResult]::new('export', 'export', [CompletionResultType]::ParameterValue, 'Export the agent''s facts as JSON Lines (with --user: that person''s and the agent-wide ones)')
            [CompletionResult]::new('enrich', 'enrich', [CompletionResultType]::ParameterValue, 'Write search keywords for facts that have none (imported or older facts), by batched side calls')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;facts;help;list' {
            break
        }
        'duduclaw-session;facts;help;approve' {
            break
        }
        'duduclaw-session;facts;help;reject' {
            break
        }
        'duduclaw-session;facts;help;review' {
            break
        }
        'duduclaw-session;facts;help;search' {
            break
        }
        'duduclaw-session;facts;help;add' {
            break
        }
        'duduclaw-session;facts;help;stand' {
            break
        }
        'duduclaw-session;facts;help;forget' {
            break
        }
        'duduclaw-session;facts;help;import' {
            break
        }
        'duduclaw-session;facts;help;export' {
            break
        }
        'duduclaw-session;facts;help;enrich' {
            break
        }
        'duduclaw-session;facts;help;help' {
            break
        }
        'duduclaw-session;history' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent (bot, persona) this conversation belongs to [required]')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'The channel (chat, room, terminal) of the conversation [required]')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'An optional thread inside the channel')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Show only the last N turns')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON array of turns (role, content, status, usage, ...)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;sessions' {
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List sessions (id, agent, channel, thread, turns, last used), most recently used first')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Show one session: key, handle, pin, summary, size, pending side calls')
            [CompletionResult]::new('rm', 'rm', [CompletionResultType]::ParameterValue, 'Delete sessions by id: their turns, pin, jobs and claude''s transcripts, leaving nothing recoverable')
            [CompletionResult]::new('prune', 'prune', [CompletionResultType]::ParameterValue, 'Delete (as `rm` does) sessions not used for longer than a duration; prints their ids')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;sessions;list' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'Only this agent''s sessions')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON array of session objects')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;sessions;show' {
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON object')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;sessions;rm' {
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;sessions;prune' {
            [CompletionResult]::new('--older-than', '--older-than', [CompletionResultType]::ParameterName, 'How long unused, e.g. 30d, 12h, 1week 2days')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Only list what would be deleted')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;sessions;help' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List sessions (id, agent, channel, thread, turns, last used), most recently used first')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Show one session: key, handle, pin, summary, size, pending side calls')
            [CompletionResult]::new('rm', 'rm', [CompletionResultType]::ParameterValue, 'Delete sessions by id: their turns, pin, jobs and claude''s transcripts, leaving nothing recoverable')
            [CompletionResult]::new('prune', 'prune', [CompletionResultType]::ParameterValue, 'Delete (as `rm` does) sessions not used for longer than a duration; prints their ids')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;sessions;help;list' {
            break
        }
        'duduclaw-session;sessions;help;show' {
            break
        }
        'duduclaw-session;sessions;help;rm' {
            break
        }
        'duduclaw-session;sessions;help;prune' {
            break
        }
        'duduclaw-session;sessions;help;help' {
            break
        }
        'duduclaw-session;jobs' {
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List open, failed and recently finished jobs: id, kind, status, attempts, session, error, why it waits')
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run the runnable jobs now, in the foreground (e.g. from cron), and print a summary')
            [CompletionResult]::new('retry', 'retry', [CompletionResultType]::ParameterValue, 'Make a job runnable again, with a fresh set of attempts')
            [CompletionResult]::new('work', 'work', [CompletionResultType]::ParameterValue, 'The detached worker a turn starts (not for people)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;jobs;list' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'Only this agent''s sessions')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'With --agent: only this channel''s session')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'With --agent and --channel: only this thread''s session')
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'Finished jobs this recent are listed too, e.g. 1h, 7d')
            [CompletionResult]::new('--side-concurrency', '--side-concurrency', [CompletionResultType]::ParameterName, 'Side calls that run at once on this host, counted across every worker, `jobs run` and `--wait-side` turn (1 to 64)')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'The whole store, whatever --agent/--channel/--thread or their environment variables say')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON array of job objects (with `waiting`: why a job still queued has not run)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;jobs;run' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'Only this agent''s sessions')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'With --agent: only this channel''s session')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'With --agent and --channel: only this thread''s session')
            [CompletionResult]::new('--extract-model', '--extract-model', [CompletionResultType]::ParameterName, 'Model for the side calls (pin, facts, summaries, keywords) whose job does not name one')
            [CompletionResult]::new('--side-timeout', '--side-timeout', [CompletionResultType]::ParameterName, 'Bound on each side call (seconds, or e.g. 45s, 2m; at most 1h): the time it runs or waits on the network; time a loaded host keeps it waiting for a CPU is not counted, up to 4 times the bound in all')
            [CompletionResult]::new('--side-concurrency', '--side-concurrency', [CompletionResultType]::ParameterName, 'Side calls that run at once on this host, counted across every worker, `jobs run` and `--wait-side` turn (1 to 64)')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'The whole store, whatever --agent/--channel/--thread or their environment variables say')
            [CompletionResult]::new('--direct-api', '--direct-api', [CompletionResultType]::ParameterName, 'Send calls straight to the Messages API (needs ANTHROPIC_API_KEY)')
            [CompletionResult]::new('--no-direct-api', '--no-direct-api', [CompletionResultType]::ParameterName, 'Never fall back to the Messages API when claude is missing or not logged in')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'duduclaw-session;jobs;retry' {
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;jobs;work' {
            [CompletionResult]::new('--settings', '--settings', [CompletionResultType]::ParameterName, 'The worker''s settings, as the turn that starts it writes them')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;jobs;help' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List open, failed and recently finished jobs: id, kind, status, attempts, session, error, why it waits')
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run the runnable jobs now, in the foreground (e.g. from cron), and print a summary')
            [CompletionResult]::new('retry', 'retry', [CompletionResultType]::ParameterValue, 'Make a job runnable again, with a fresh set of attempts')
            [CompletionResult]::new('work', 'work', [CompletionResultType]::ParameterValue, 'The detached worker a turn starts (not for people)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;jobs;help;list' {
            break
        }
        'duduclaw-session;jobs;help;run' {
            break
        }
        'duduclaw-session;jobs;help;retry' {
            break
        }
        'duduclaw-session;jobs;help;work' {
            break
        }
        'duduclaw-session;jobs;help;help' {
            break
        }
        'duduclaw-session;prompt' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'The agent (bot, persona) this conversation belongs to [required]')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'The channel (chat, room, terminal) of the conversation [required]')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'An optional thread inside the channel')
            [CompletionResult]::new('--attach', '--attach', [CompletionResultType]::ParameterName, 'A file to send with the message (repeatable): a PNG, JPEG, GIF or WebP image, a PDF, or UTF-8 text (a log, code, CSV), by its bytes; `-` reads it from stdin when the message is an argument')
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'Model for the main call (passed to claude --model)')
            [CompletionResult]::new('--extract-model', '--extract-model', [CompletionResultType]::ParameterName, 'Model for the side calls (pin, facts, summaries, keywords) whose job does not name one')
            [CompletionResult]::new('--side-timeout', '--side-timeout', [CompletionResultType]::ParameterName, 'Bound on each side call (seconds, or e.g. 45s, 2m; at most 1h): the time it runs or waits on the network; time a loaded host keeps it waiting for a CPU is not counted, up to 4 times the bound in all')
            [CompletionResult]::new('--side-concurrency', '--side-concurrency', [CompletionResultType]::ParameterName, 'Side calls that run at once on this host, counted across every worker, `jobs run` and `--wait-side` turn (1 to 64)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Give up on the main call after this long (seconds, or e.g. 90s, 10m; at most 24h)')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'Scope facts to one person as well as the agent')
            [CompletionResult]::new('--compact-at', '--compact-at', [CompletionResultType]::ParameterName, 'Compact the session when its context passes this many estimated tokens')
            [CompletionResult]::new('--facts-in', '--facts-in', [CompletionResultType]::ParameterName, 'Where the injected facts go')
            [CompletionResult]::new('--memory-every', '--memory-every', [CompletionResultType]::ParameterName, 'Run the memory side call (facts, corrections, clarifications, drift) once this many substantive exchanges wait (1: after each; a pause past --cache-ttl, a compaction and `jobs run` run it sooner)')
            [CompletionResult]::new('--system-pin', '--system-pin', [CompletionResultType]::ParameterName, 'When the pin goes at the system-prompt tail (the recap always carries the newest pin)')
            [CompletionResult]::new('--cache-ttl', '--cache-ttl', [CompletionResultType]::ParameterName, 'How long the prompt cache stays warm after a turn (the API''s default lifetime is 5m; 0s: always cold; at most 24h)')
            [CompletionResult]::new('--profile-tokens', '--profile-tokens', [CompletionResultType]::ParameterName, 'The profile''s budget, in estimated tokens: the scope''s standing facts (all its facts when they fit) at the system-prompt tail, after the pin (0: no profile)')
            [CompletionResult]::new('--warm-max', '--warm-max', [CompletionResultType]::ParameterName, 'At most this many claudes kept running on this host, over every session (the least recently used ends first)')
            [CompletionResult]::new('--claude-arg', '--claude-arg', [CompletionResultType]::ParameterName, 'An argument passed to claude for the main call (repeatable), e.g. --claude-arg=--add-dir=/src')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--again', '--again', [CompletionResultType]::ParameterName, 'Send the session''s last failed message again, as a normal turn')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object instead of streaming the reply')
            [CompletionResult]::new('--stream-json', '--stream-json', [CompletionResultType]::ParameterName, 'JSON Lines as the turn happens: start, each piece of text, each tool used, then done (the --json object) or error')
            [CompletionResult]::new('--direct-api', '--direct-api', [CompletionResultType]::ParameterName, 'Send calls straight to the Messages API (needs ANTHROPIC_API_KEY)')
            [CompletionResult]::new('--no-direct-api', '--no-direct-api', [CompletionResultType]::ParameterName, 'Never fall back to the Messages API when claude is missing or not logged in')
            [CompletionResult]::new('--no-extract', '--no-extract', [CompletionResultType]::ParameterName, 'Skip pin and fact extraction (compaction still runs: it guards the context size)')
            [CompletionResult]::new('--no-compact', '--no-compact', [CompletionResultType]::ParameterName, 'Never compact the session, however long it grows')
            [CompletionResult]::new('--light', '--light', [CompletionResultType]::ParameterName, 'Run the main call on the lightweight flags (no tools, one model turn)')
            [CompletionResult]::new('--wait-side', '--wait-side', [CompletionResultType]::ParameterName, 'Wait (bounded by --side-timeout) for this turn''s side calls instead of leaving them to the detached worker')
            [CompletionResult]::new('--no-user-setup', '--no-user-setup', [CompletionResultType]::ParameterName, 'Run the main call without your MCP servers, hooks, skills and CLAUDE.md, as side calls always run (for a bot they only slow down)')
            [CompletionResult]::new('--no-warm', '--no-warm', [CompletionResultType]::ParameterName, 'Start claude afresh for every turn instead of keeping the session''s claude running between turns (in the per-host process `duduclaw-session host`)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'duduclaw-session;store' {
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('copy', 'copy', [CompletionResultType]::ParameterValue, 'Copy sessions (pins, summaries, history) and facts into another store')
            [CompletionResult]::new('migrate', 'migrate', [CompletionResultType]::ParameterValue, 'Bring the store to this build''s schema, and do nothing else')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;store;copy' {
            [CompletionResult]::new('--to', '--to', [CompletionResultType]::ParameterName, 'The store to copy into: a file path or a postgres:// URL [default: --db]')
            [CompletionResult]::new('--from', '--from', [CompletionResultType]::ParameterName, 'The store to copy from: a file path or a postgres:// URL [default: --db]')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON object with the counts')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'duduclaw-session;store;migrate' {
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'duduclaw-session;store;help' {
            [CompletionResult]::new('copy', 'copy', [CompletionResultType]::ParameterValue, 'Copy sessions (pins, summaries, history) and facts into another store')
            [CompletionResult]::new('migrate', 'migrate', [CompletionResultType]::ParameterValue, 'Bring the store to this build''s schema, and do nothing else')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;store;help;copy' {
            break
        }
        'duduclaw-session;store;help;migrate' {
            break
        }
        'duduclaw-session;store;help;help' {
            break
        }
        'duduclaw-session;forget' {
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'The person (`--user` of their turns)')
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'Only in this agent''s sessions and facts [default: every agent]; no environment variable, so an exported DUDUCLAW_AGENT never narrows an erasure silently')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Count what would be erased, by place, and change nothing')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print the counts as one JSON object')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;events' {
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'Only events after this id, or this recent (2h, 7d), or since this time (RFC 3339) [default: the newest --limit]')
            [CompletionResult]::new('--kind', '--kind', [CompletionResultType]::ParameterName, 'Only this kind, or a family ending in ''.'' (fact.); repeatable')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'At most this many: the oldest after --since, else the newest (with --follow: how many of the newest to show first) [default: 20 without --since, all with it]')
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'Only this agent''s sessions')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'With --agent: only this channel''s session')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'With --agent and --channel: only this thread''s session')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'Keep printing events as they are written, like tail -f')
            [CompletionResult]::new('--follow', '--follow', [CompletionResultType]::ParameterName, 'Keep printing events as they are written, like tail -f')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'One JSON object per line')
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'The whole store, whatever --agent/--channel/--thread or their environment variables say')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('prune', 'prune', [CompletionResultType]::ParameterValue, 'Delete events older than a duration, to bound the log')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;events;prune' {
            [CompletionResult]::new('--older-than', '--older-than', [CompletionResultType]::ParameterName, 'How old, e.g. 30d, 12h')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;events;help' {
            [CompletionResult]::new('prune', 'prune', [CompletionResultType]::ParameterValue, 'Delete events older than a duration, to bound the log')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;events;help;prune' {
            break
        }
        'duduclaw-session;events;help;help' {
            break
        }
        'duduclaw-session;stats' {
            [CompletionResult]::new('--agent', '--agent', [CompletionResultType]::ParameterName, 'Only this agent''s sessions')
            [CompletionResult]::new('--channel', '--channel', [CompletionResultType]::ParameterName, 'With --agent: only this channel''s session')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'With --agent and --channel: only this thread''s session')
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'Only calls this recent, e.g. 7d, 12h')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'The whole store, whatever --agent/--channel/--thread or their environment variables say')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON object with the same figures')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;doctor' {
            [CompletionResult]::new('--side-concurrency', '--side-concurrency', [CompletionResultType]::ParameterName, 'Side calls that run at once on this host, counted across every worker, `jobs run` and `--wait-side` turn (1 to 64)')
            [CompletionResult]::new('--db', '--db', [CompletionResultType]::ParameterName, 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]')
            [CompletionResult]::new('--claude', '--claude', [CompletionResultType]::ParameterName, 'The claude executable [default: `claude` on PATH]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON object')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;completions' {
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;man' {
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;host' {
            [CompletionResult]::new('--status', '--status', [CompletionResultType]::ParameterName, 'Print the claudes the running host keeps (JSON) instead of serving')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'duduclaw-session;schema' {
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what happens to stderr (-vv for more)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'duduclaw-session;help' {
            [CompletionResult]::new('turn', 'turn', [CompletionResultType]::ParameterValue, 'Run one turn: send MESSAGE (or stdin) and print the reply as it arrives')
            [CompletionResult]::new('id', 'id', [CompletionResultType]::ParameterValue, 'Print the session''s deterministic id')
            [CompletionResult]::new('pin', 'pin', [CompletionResultType]::ParameterValue, 'Read or edit the session''s pinned task')
            [CompletionResult]::new('facts', 'facts', [CompletionResultType]::ParameterValue, 'List, search and edit an agent''s key facts')
            [CompletionResult]::new('history', 'history', [CompletionResultType]::ParameterValue, 'Show a session''s stored turns, failed ones with their reason')
            [CompletionResult]::new('sessions', 'sessions', [CompletionResultType]::ParameterValue, 'Inspect and remove stored sessions')
            [CompletionResult]::new('jobs', 'jobs', [CompletionResultType]::ParameterValue, 'The side-call jobs (pin, facts, summaries): list, run, retry')
            [CompletionResult]::new('prompt', 'prompt', [CompletionResultType]::ParameterValue, 'Dry run: print exactly what `turn` would send, without calling or writing anything')
            [CompletionResult]::new('store', 'store', [CompletionResultType]::ParameterValue, 'Move a store between engines (a SQLite file and a PostgreSQL server), or migrate it')
            [CompletionResult]::new('forget', 'forget', [CompletionResultType]::ParameterValue, 'Erase a person: their facts, their messages and the replies to them (as tombstones), pin revisions, summaries and side-call jobs that quote them, and claude''s transcripts of the sessions touched')
            [CompletionResult]::new('events', 'events', [CompletionResultType]::ParameterValue, 'The memory''s event feed: turns, pins, facts, compactions, failed side calls, drift and corrections, one per line')
            [CompletionResult]::new('stats', 'stats', [CompletionResultType]::ParameterValue, 'What the conversations cost: tokens, cache reads, side calls'' share, injected memory')
            [CompletionResult]::new('doctor', 'doctor', [CompletionResultType]::ParameterValue, 'Check claude, the Messages API and the store, and say what is wrong')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Print the man page (roff) of the program, or of a subcommand: `man facts list`')
            [CompletionResult]::new('host', 'host', [CompletionResultType]::ParameterValue, 'The per-host process that keeps the sessions'' claudes running between turns, started by a turn (not for people)')
            [CompletionResult]::new('schema', 'schema', [CompletionResultType]::ParameterValue, 'Print the JSON Schema (draft 2020-12) of a JSON output, or list the outputs: `schema turn`')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'duduclaw-session;help;turn' {
            break
        }
        'duduclaw-session;help;id' {
            break
        }
        'duduclaw-session;help;pin' {
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Print the pinned task (nothing if there is none)')
            [CompletionResult]::new('set', 'set', [CompletionResultType]::ParameterValue, 'Replace the pinned task (at most 1,000 characters)')
            [CompletionResult]::new('append', 'append', [CompletionResultType]::ParameterValue, 'Add your words as a `[+]` line to the pinned task, verbatim (the pin stays within 1,000 characters)')
            [CompletionResult]::new('clear', 'clear', [CompletionResultType]::ParameterValue, 'Remove the pinned task')
            [CompletionResult]::new('history', 'history', [CompletionResultType]::ParameterValue, 'List the pin''s kept revisions, oldest first: revision, time, source (turn), pin')
            [CompletionResult]::new('restore', 'restore', [CompletionResultType]::ParameterValue, 'Bring back a kept revision of the pin (`pin history` lists them)')
            break
        }
        'duduclaw-session;help;pin;show' {
            break
        }
        'duduclaw-session;help;pin;set' {
            break
        }
        'duduclaw-session;help;pin;append' {
            break
        }
        'duduclaw-session;help;pin;clear' {
            break
        }
        'duduclaw-session;help;pin;history' {
            break
        }
        'duduclaw-session;help;pin;restore' {
            break
        }
        'duduclaw-session;help;facts' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the facts, most used first: id, uses, who said it (- for agent-wide), how it came, text')
            [CompletionResult]::new('approve', 'approve', [CompletionResultType]::ParameterValue, 'Make facts that wait for review live: the profile and the facts a turn injects may carry them')
            [CompletionResult]::new('reject', 'reject', [CompletionResultType]::ParameterValue, 'Delete facts that wait for review, leaving nothing recoverable in the store')
            [CompletionResult]::new('review', 'review', [CompletionResultType]::ParameterValue, 'Whether the agent''s new standing facts wait for review (`facts approve`); with on or off, set it')
            [CompletionResult]::new('search', 'search', [CompletionResultType]::ParameterValue, 'Rank facts against a query, as a turn would')
            [CompletionResult]::new('add', 'add', [CompletionResultType]::ParameterValue, 'Add a fact by hand and print its id')
            [CompletionResult]::new('stand', 'stand', [CompletionResultType]::ParameterValue, 'Mark facts standing (the profile carries them in every conversation), or with --clear not')
            [CompletionResult]::new('forget', 'forget', [CompletionResultType]::ParameterValue, 'Delete facts by id (from `facts list`), leaving nothing recoverable in the store')
            [CompletionResult]::new('import', 'import', [CompletionResultType]::ParameterValue, 'Import facts from JSON Lines; duplicates and secrets are skipped, a bad line imports nothing')
            [CompletionResult]::new('export', 'export', [CompletionResultType]::ParameterValue, 'Export the agent''s facts as JSON Lines (with --user: that person''s and the agent-wide ones)')
            [CompletionResult]::new('enrich', 'enrich', [CompletionResultType]::ParameterValue, 'Write search keywords for facts that have none (imported or older facts), by batched side calls')
            break
        }
        'duduclaw-session;help;facts;list' {
            break
        }
        'duduclaw-session;help;facts;approve' {
            break
        }
        'duduclaw-session;help;facts;reject' {
            break
        }
        'duduclaw-session;help;facts;review' {
            break
        }
        'duduclaw-session;help;facts;search' {
            break
        }
        'duduclaw-session;help;facts;add' {
            break
        }
        'duduclaw-session;help;facts;stand' {
            break
        }
        'duduclaw-session;help;facts;forget' {
            break
        }
        'duduclaw-session;help;facts;import' {
            break
        }
        'duduclaw-session;help;facts;export' {
            break
        }
        'duduclaw-session;help;facts;enrich' {
            break
        }
        'duduclaw-session;help;history' {
            break
        }
        'duduclaw-session;help;sessions' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List sessions (id, agent, channel, thread, turns, last used), most recently used first')
            [CompletionResult]::new('show', 'show', [CompletionResultType]::ParameterValue, 'Show one session: key, handle, pin, summary, size, pending side calls')
            [CompletionResult]::new('rm', 'rm', [CompletionResultType]::ParameterValue, 'Delete sessions by id: their turns, pin, jobs and claude''s transcripts, leaving nothing recoverable')
            [CompletionResult]::new('prune', 'prune', [CompletionResultType]::ParameterValue, 'Delete (as `rm` does) sessions not used for longer than a duration; prints their ids')
            break
        }
        'duduclaw-session;help;sessions;list' {
            break
        }
        'duduclaw-session;help;sessions;show' {
            break
        }
        'duduclaw-session;help;sessions;rm' {
            break
        }
        'duduclaw-session;help;sessions;prune' {
            break
        }
        'duduclaw-session;help;jobs' {
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List open, failed and recently finished jobs: id, kind, status, attempts, session, error, why it waits')
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run the runnable jobs now, in the foreground (e.g. from cron), and print a summary')
            [CompletionResult]::new('retry', 'retry', [CompletionResultType]::ParameterValue, 'Make a job runnable again, with a fresh set of attempts')
            [CompletionResult]::new('work', 'work', [CompletionResultType]::ParameterValue, 'The detached worker a turn starts (not for people)')
            break
        }
        'duduclaw-session;help;jobs;list' {
            break
        }
        'duduclaw-session;help;jobs;run' {
            break
        }
        'duduclaw-session;help;jobs;retry' {
            break
        }
        'duduclaw-session;help;jobs;work' {
            break
        }
        'duduclaw-session;help;prompt' {
            break
        }
        'duduclaw-session;help;store' {
            [CompletionResult]::new('copy', 'copy', [CompletionResultType]::ParameterValue, 'Copy sessions (pins, summaries, history) and facts into another store')
            [CompletionResult]::new('migrate', 'migrate', [CompletionResultType]::ParameterValue, 'Bring the store to this build''s schema, and do nothing else')
            break
        }
        'duduclaw-session;help;store;copy' {
            break
        }
        'duduclaw-session;help;store;migrate' {
            break
        }
        'duduclaw-session;help;forget' {
            break
        }
        'duduclaw-session;help;events' {
            [CompletionResult]::new('prune', 'prune', [CompletionResultType]::ParameterValue, 'Delete events older than a duration, to bound the log')
            break
        }
        'duduclaw-session;help;events;prune' {
            break
        }
        'duduclaw-session;help;stats' {
            break
        }
        'duduclaw-session;help;doctor' {
            break
        }
        'duduclaw-session;help;completions' {
            break
        }
        'duduclaw-session;help;man' {
            break
        }
        'duduclaw-session;help;host' {
            break
        }
        'duduclaw-session;help;schema' {
            break
        }
        'duduclaw-session;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
