# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_duduclaw_session_global_optspecs
    string join \n db= claude= v/verbose q/quiet h/help V/version
end

function __fish_duduclaw_session_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_duduclaw_session_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_duduclaw_session_using_subcommand
    set -l cmd (__fish_duduclaw_session_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -s V -l version -d 'Print version'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "turn" -d 'Run one turn: send MESSAGE (or stdin) and print the reply as it arrives'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "id" -d 'Print the session\'s deterministic id'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "pin" -d 'Read or edit the session\'s pinned task'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "facts" -d 'List, search and edit an agent\'s key facts'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "history" -d 'Show a session\'s stored turns, failed ones with their reason'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "sessions" -d 'Inspect and remove stored sessions'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "jobs" -d 'The side-call jobs (pin, facts, summaries): list, run, retry'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "prompt" -d 'Dry run: print exactly what `turn` would send, without calling or writing anything'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "store" -d 'Move a store between engines: a SQLite file and a PostgreSQL server'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "forget" -d 'Erase a person: their facts, their messages and the replies to them (as tombstones), pin revisions, summaries and side-call jobs that quote them, and claude\'s transcripts of the sessions touched'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "events" -d 'The memory\'s event feed: turns, pins, facts, compactions, failed side calls, drift and corrections, one per line'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "stats" -d 'What the conversations cost: tokens, cache reads, side calls\' share, injected memory'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "doctor" -d 'Check claude, the Messages API and the store, and say what is wrong'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "man" -d 'Print the man page (roff) of the program, or of a subcommand: `man facts list`'
complete -c duduclaw-session -n "__fish_duduclaw_session_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l agent -d 'The agent (bot, persona) this conversation belongs to [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l channel -d 'The channel (chat, room, terminal) of the conversation [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l thread -d 'An optional thread inside the channel' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l model -d 'Model for the main call (passed to claude --model)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l extract-model -d 'Model for the side calls (pin, facts, summaries, keywords) whose job does not name one' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l side-timeout -d 'Bound on each side call (seconds, or e.g. 45s, 2m; at most 1h)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l side-concurrency -d 'Side calls that run at once on this host, counted across every worker, `jobs run` and `--wait-side` turn (1 to 64)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l timeout -d 'Give up on the main call after this long (seconds, or e.g. 90s, 10m; at most 24h)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l user -d 'Scope facts to one person as well as the agent' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l compact-at -d 'Compact the session when its context passes this many estimated tokens' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l facts-in -d 'Where the injected facts go' -r -f -a "message\t'At the head of the user message, after the recap (keeps the system prompt byte-stable)'
system\t'At the tail of the system prompt, after the pin'"
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l claude-arg -d 'An argument passed to claude for the main call (repeatable), e.g. --claude-arg=--add-dir=/src' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l again -d 'Send the session\'s last failed message again, as a normal turn'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l json -d 'Print one JSON object instead of streaming the reply'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l stream-json -d 'JSON Lines as the turn happens: start, each piece of text, each tool used, then done (the --json object) or error'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l direct-api -d 'Send calls straight to the Messages API (needs ANTHROPIC_API_KEY)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l no-direct-api -d 'Never fall back to the Messages API when claude is missing or not logged in'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l no-extract -d 'Skip pin and fact extraction (compaction still runs: it guards the context size)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l no-compact -d 'Never compact the session, however long it grows'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l light -d 'Run the main call on the lightweight flags (no tools, one model turn)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -l wait-side -d 'Wait (bounded by --side-timeout) for this turn\'s side calls instead of leaving them to the detached worker'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand turn" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand id" -l agent -d 'The agent (bot, persona) this conversation belongs to [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand id" -l channel -d 'The channel (chat, room, terminal) of the conversation [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand id" -l thread -d 'An optional thread inside the channel' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand id" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand id" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand id" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand id" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand id" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and not __fish_seen_subcommand_from show set append clear history restore help" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and not __fish_seen_subcommand_from show set append clear history restore help" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and not __fish_seen_subcommand_from show set append clear history restore help" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and not __fish_seen_subcommand_from show set append clear history restore help" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and not __fish_seen_subcommand_from show set append clear history restore help" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and not __fish_seen_subcommand_from show set append clear history restore help" -f -a "show" -d 'Print the pinned task (nothing if there is none)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and not __fish_seen_subcommand_from show set append clear history restore help" -f -a "set" -d 'Replace the pinned task (at most 1,000 characters)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and not __fish_seen_subcommand_from show set append clear history restore help" -f -a "append" -d 'Add your words as a `[+]` line to the pinned task, verbatim (the pin stays within 1,000 characters)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and not __fish_seen_subcommand_from show set append clear history restore help" -f -a "clear" -d 'Remove the pinned task'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and not __fish_seen_subcommand_from show set append clear history restore help" -f -a "history" -d 'List the pin\'s kept revisions, oldest first: revision, time, source (turn), pin'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and not __fish_seen_subcommand_from show set append clear history restore help" -f -a "restore" -d 'Bring back a kept revision of the pin (`pin history` lists them)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and not __fish_seen_subcommand_from show set append clear history restore help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from show" -l agent -d 'The agent (bot, persona) this conversation belongs to [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from show" -l channel -d 'The channel (chat, room, terminal) of the conversation [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from show" -l thread -d 'An optional thread inside the channel' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from show" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from show" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from show" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from show" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from set" -l agent -d 'The agent (bot, persona) this conversation belongs to [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from set" -l channel -d 'The channel (chat, room, terminal) of the conversation [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from set" -l thread -d 'An optional thread inside the channel' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from set" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from set" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from set" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from set" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from set" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from append" -l agent -d 'The agent (bot, persona) this conversation belongs to [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from append" -l channel -d 'The channel (chat, room, terminal) of the conversation [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from append" -l thread -d 'An optional thread inside the channel' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from append" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from append" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from append" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from append" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from append" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from clear" -l agent -d 'The agent (bot, persona) this conversation belongs to [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from clear" -l channel -d 'The channel (chat, room, terminal) of the conversation [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from clear" -l thread -d 'An optional thread inside the channel' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from clear" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from clear" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from clear" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from clear" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from clear" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from history" -l agent -d 'The agent (bot, persona) this conversation belongs to [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from history" -l channel -d 'The channel (chat, room, terminal) of the conversation [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from history" -l thread -d 'An optional thread inside the channel' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from history" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from history" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from history" -l json -d 'Print a JSON array of revisions (rev, pin, source, turn_id, from_rev, created_at)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from history" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from history" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from history" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from restore" -l agent -d 'The agent (bot, persona) this conversation belongs to [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from restore" -l channel -d 'The channel (chat, room, terminal) of the conversation [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from restore" -l thread -d 'An optional thread inside the channel' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from restore" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from restore" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from restore" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from restore" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from restore" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from help" -f -a "show" -d 'Print the pinned task (nothing if there is none)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from help" -f -a "set" -d 'Replace the pinned task (at most 1,000 characters)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from help" -f -a "append" -d 'Add your words as a `[+]` line to the pinned task, verbatim (the pin stays within 1,000 characters)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from help" -f -a "clear" -d 'Remove the pinned task'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from help" -f -a "history" -d 'List the pin\'s kept revisions, oldest first: revision, time, source (turn), pin'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from help" -f -a "restore" -d 'Bring back a kept revision of the pin (`pin history` lists them)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand pin; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and not __fish_seen_subcommand_from list search add forget import export enrich help" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and not __fish_seen_subcommand_from list search add forget import export enrich help" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and not __fish_seen_subcommand_from list search add forget import export enrich help" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and not __fish_seen_subcommand_from list search add forget import export enrich help" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and not __fish_seen_subcommand_from list search add forget import export enrich help" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and not __fish_seen_subcommand_from list search add forget import export enrich help" -f -a "list" -d 'List the facts, most used first: id, uses, person (- for agent-wide), text'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and not __fish_seen_subcommand_from list search add forget import export enrich help" -f -a "search" -d 'Rank facts against a query, as a turn would'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and not __fish_seen_subcommand_from list search add forget import export enrich help" -f -a "add" -d 'Add a fact by hand and print its id'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and not __fish_seen_subcommand_from list search add forget import export enrich help" -f -a "forget" -d 'Delete facts by id (from `facts list`), leaving nothing recoverable in the store'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and not __fish_seen_subcommand_from list search add forget import export enrich help" -f -a "import" -d 'Import facts from JSON Lines; duplicates and secrets are skipped, a bad line imports nothing'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and not __fish_seen_subcommand_from list search add forget import export enrich help" -f -a "export" -d 'Export the agent\'s facts as JSON Lines (with --user: that person\'s and the agent-wide ones)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and not __fish_seen_subcommand_from list search add forget import export enrich help" -f -a "enrich" -d 'Write search keywords for facts that have none (imported or older facts), by batched side calls'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and not __fish_seen_subcommand_from list search add forget import export enrich help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from list" -l agent -d 'The agent whose facts these are [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from list" -l user -d 'One person: reads include their facts with the agent-wide ones; writes store facts for them only' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from list" -l limit -d 'Show at most N facts' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from list" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from list" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from list" -l json -d 'Print a JSON array of objects (id, content, access_count, ...)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from list" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from search" -l agent -d 'The agent whose facts these are [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from search" -l user -d 'One person: reads include their facts with the agent-wide ones; writes store facts for them only' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from search" -l limit -d 'Show at most N facts' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from search" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from search" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from search" -l json -d 'Print a JSON array of objects (id, content, access_count, score, ...)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from search" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from search" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from search" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from add" -l agent -d 'The agent whose facts these are [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from add" -l user -d 'One person: reads include their facts with the agent-wide ones; writes store facts for them only' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from add" -l keywords -d 'Search keywords, comma-separated: words people may ask with (synonyms, the other language\'s terms)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from add" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from add" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from add" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from add" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from forget" -l agent -d 'The agent whose facts these are [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from forget" -l user -d 'One person: reads include their facts with the agent-wide ones; writes store facts for them only' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from forget" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from forget" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from forget" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from forget" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from forget" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from import" -l agent -d 'The agent whose facts these are [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from import" -l user -d 'One person: reads include their facts with the agent-wide ones; writes store facts for them only' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from import" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from import" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from import" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from import" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from import" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from export" -l agent -d 'The agent whose facts these are [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from export" -l user -d 'One person: reads include their facts with the agent-wide ones; writes store facts for them only' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from export" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from export" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from export" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from export" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from export" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -l agent -d 'The agent whose facts to enrich' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -l limit -d 'Enrich at most N facts in this run' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -l extract-model -d 'Model for the side calls (pin, facts, summaries, keywords) whose job does not name one' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -l side-timeout -d 'Bound on each side call (seconds, or e.g. 45s, 2m; at most 1h)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -l side-concurrency -d 'Side calls that run at once on this host, counted across every worker, `jobs run` and `--wait-side` turn (1 to 64)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -l all -d 'Every agent\'s facts (instead of --agent\'s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -l json -d 'Print a JSON summary (facts enriched and left, jobs, cost)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -l direct-api -d 'Send calls straight to the Messages API (needs ANTHROPIC_API_KEY)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -l no-direct-api -d 'Never fall back to the Messages API when claude is missing or not logged in'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from enrich" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the facts, most used first: id, uses, person (- for agent-wide), text'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from help" -f -a "search" -d 'Rank facts against a query, as a turn would'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from help" -f -a "add" -d 'Add a fact by hand and print its id'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from help" -f -a "forget" -d 'Delete facts by id (from `facts list`), leaving nothing recoverable in the store'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from help" -f -a "import" -d 'Import facts from JSON Lines; duplicates and secrets are skipped, a bad line imports nothing'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from help" -f -a "export" -d 'Export the agent\'s facts as JSON Lines (with --user: that person\'s and the agent-wide ones)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from help" -f -a "enrich" -d 'Write search keywords for facts that have none (imported or older facts), by batched side calls'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand facts; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand history" -l agent -d 'The agent (bot, persona) this conversation belongs to [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand history" -l channel -d 'The channel (chat, room, terminal) of the conversation [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand history" -l thread -d 'An optional thread inside the channel' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand history" -l limit -d 'Show only the last N turns' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand history" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand history" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand history" -l json -d 'Print a JSON array of turns (role, content, status, usage, ...)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand history" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand history" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand history" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and not __fish_seen_subcommand_from list show rm prune help" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and not __fish_seen_subcommand_from list show rm prune help" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and not __fish_seen_subcommand_from list show rm prune help" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and not __fish_seen_subcommand_from list show rm prune help" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and not __fish_seen_subcommand_from list show rm prune help" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and not __fish_seen_subcommand_from list show rm prune help" -f -a "list" -d 'List sessions (id, agent, channel, thread, turns, last used), most recently used first'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and not __fish_seen_subcommand_from list show rm prune help" -f -a "show" -d 'Show one session: key, handle, pin, summary, size, pending side calls'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and not __fish_seen_subcommand_from list show rm prune help" -f -a "rm" -d 'Delete sessions by id: their turns, pin, jobs and claude\'s transcripts, leaving nothing recoverable'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and not __fish_seen_subcommand_from list show rm prune help" -f -a "prune" -d 'Delete (as `rm` does) sessions not used for longer than a duration; prints their ids'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and not __fish_seen_subcommand_from list show rm prune help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from list" -l agent -d 'Only this agent\'s sessions' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from list" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from list" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from list" -l json -d 'Print a JSON array of session objects'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from list" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from show" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from show" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from show" -l json -d 'Print a JSON object'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from show" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from show" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from rm" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from rm" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from rm" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from rm" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from rm" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from prune" -l older-than -d 'How long unused, e.g. 30d, 12h, 1week 2days' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from prune" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from prune" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from prune" -l dry-run -d 'Only list what would be deleted'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from prune" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from prune" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from prune" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "list" -d 'List sessions (id, agent, channel, thread, turns, last used), most recently used first'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "show" -d 'Show one session: key, handle, pin, summary, size, pending side calls'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "rm" -d 'Delete sessions by id: their turns, pin, jobs and claude\'s transcripts, leaving nothing recoverable'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "prune" -d 'Delete (as `rm` does) sessions not used for longer than a duration; prints their ids'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and not __fish_seen_subcommand_from list run retry work help" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and not __fish_seen_subcommand_from list run retry work help" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and not __fish_seen_subcommand_from list run retry work help" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and not __fish_seen_subcommand_from list run retry work help" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and not __fish_seen_subcommand_from list run retry work help" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and not __fish_seen_subcommand_from list run retry work help" -f -a "list" -d 'List open, failed and recently finished jobs: id, kind, status, attempts, session, error, why it waits'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and not __fish_seen_subcommand_from list run retry work help" -f -a "run" -d 'Run the runnable jobs now, in the foreground (e.g. from cron), and print a summary'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and not __fish_seen_subcommand_from list run retry work help" -f -a "retry" -d 'Make a job runnable again, with a fresh set of attempts'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and not __fish_seen_subcommand_from list run retry work help" -f -a "work" -d 'The detached worker a turn starts (not for people)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and not __fish_seen_subcommand_from list run retry work help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from list" -l agent -d 'Only this agent\'s sessions' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from list" -l channel -d 'With --agent: only this channel\'s session' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from list" -l thread -d 'With --agent and --channel: only this thread\'s session' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from list" -l since -d 'Finished jobs this recent are listed too, e.g. 1h, 7d' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from list" -l side-concurrency -d 'Side calls that run at once on this host, counted across every worker, `jobs run` and `--wait-side` turn (1 to 64)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from list" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from list" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from list" -l all -d 'The whole store, whatever --agent/--channel/--thread or their environment variables say'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from list" -l json -d 'Print a JSON array of job objects (with `waiting`: why a job still queued has not run)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from list" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -l agent -d 'Only this agent\'s sessions' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -l channel -d 'With --agent: only this channel\'s session' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -l thread -d 'With --agent and --channel: only this thread\'s session' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -l extract-model -d 'Model for the side calls (pin, facts, summaries, keywords) whose job does not name one' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -l side-timeout -d 'Bound on each side call (seconds, or e.g. 45s, 2m; at most 1h)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -l side-concurrency -d 'Side calls that run at once on this host, counted across every worker, `jobs run` and `--wait-side` turn (1 to 64)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -l all -d 'The whole store, whatever --agent/--channel/--thread or their environment variables say'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -l direct-api -d 'Send calls straight to the Messages API (needs ANTHROPIC_API_KEY)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -l no-direct-api -d 'Never fall back to the Messages API when claude is missing or not logged in'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from retry" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from retry" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from retry" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from retry" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from retry" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from work" -l settings -d 'The worker\'s settings, as the turn that starts it writes them' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from work" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from work" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from work" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from work" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from work" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from help" -f -a "list" -d 'List open, failed and recently finished jobs: id, kind, status, attempts, session, error, why it waits'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from help" -f -a "run" -d 'Run the runnable jobs now, in the foreground (e.g. from cron), and print a summary'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from help" -f -a "retry" -d 'Make a job runnable again, with a fresh set of attempts'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from help" -f -a "work" -d 'The detached worker a turn starts (not for people)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand jobs; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l agent -d 'The agent (bot, persona) this conversation belongs to [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l channel -d 'The channel (chat, room, terminal) of the conversation [required]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l thread -d 'An optional thread inside the channel' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l model -d 'Model for the main call (passed to claude --model)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l extract-model -d 'Model for the side calls (pin, facts, summaries, keywords) whose job does not name one' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l side-timeout -d 'Bound on each side call (seconds, or e.g. 45s, 2m; at most 1h)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l side-concurrency -d 'Side calls that run at once on this host, counted across every worker, `jobs run` and `--wait-side` turn (1 to 64)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l timeout -d 'Give up on the main call after this long (seconds, or e.g. 90s, 10m; at most 24h)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l user -d 'Scope facts to one person as well as the agent' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l compact-at -d 'Compact the session when its context passes this many estimated tokens' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l facts-in -d 'Where the injected facts go' -r -f -a "message\t'At the head of the user message, after the recap (keeps the system prompt byte-stable)'
system\t'At the tail of the system prompt, after the pin'"
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l claude-arg -d 'An argument passed to claude for the main call (repeatable), e.g. --claude-arg=--add-dir=/src' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l again -d 'Send the session\'s last failed message again, as a normal turn'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l json -d 'Print one JSON object instead of streaming the reply'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l stream-json -d 'JSON Lines as the turn happens: start, each piece of text, each tool used, then done (the --json object) or error'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l direct-api -d 'Send calls straight to the Messages API (needs ANTHROPIC_API_KEY)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l no-direct-api -d 'Never fall back to the Messages API when claude is missing or not logged in'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l no-extract -d 'Skip pin and fact extraction (compaction still runs: it guards the context size)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l no-compact -d 'Never compact the session, however long it grows'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l light -d 'Run the main call on the lightweight flags (no tools, one model turn)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -l wait-side -d 'Wait (bounded by --side-timeout) for this turn\'s side calls instead of leaving them to the detached worker'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand prompt" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and not __fish_seen_subcommand_from copy help" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and not __fish_seen_subcommand_from copy help" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and not __fish_seen_subcommand_from copy help" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and not __fish_seen_subcommand_from copy help" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and not __fish_seen_subcommand_from copy help" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and not __fish_seen_subcommand_from copy help" -f -a "copy" -d 'Copy sessions (pins, summaries, history) and facts into another store'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and not __fish_seen_subcommand_from copy help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and __fish_seen_subcommand_from copy" -l to -d 'The store to copy into: a file path or a postgres:// URL [default: --db]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and __fish_seen_subcommand_from copy" -l from -d 'The store to copy from: a file path or a postgres:// URL [default: --db]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and __fish_seen_subcommand_from copy" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and __fish_seen_subcommand_from copy" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and __fish_seen_subcommand_from copy" -l json -d 'Print a JSON object with the counts'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and __fish_seen_subcommand_from copy" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and __fish_seen_subcommand_from copy" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and __fish_seen_subcommand_from copy" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and __fish_seen_subcommand_from help" -f -a "copy" -d 'Copy sessions (pins, summaries, history) and facts into another store'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand store; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand forget" -l user -d 'The person (`--user` of their turns)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand forget" -l agent -d 'Only in this agent\'s sessions and facts [default: every agent]; no environment variable, so an exported DUDUCLAW_AGENT never narrows an erasure silently' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand forget" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand forget" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand forget" -l dry-run -d 'Count what would be erased, by place, and change nothing'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand forget" -l json -d 'Print the counts as one JSON object'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand forget" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand forget" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand forget" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -l since -d 'Only events after this id, or this recent (2h, 7d), or since this time (RFC 3339) [default: the newest --limit]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -l kind -d 'Only this kind, or a family ending in \'.\' (fact.); repeatable' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -l limit -d 'At most this many: the oldest after --since, else the newest (with --follow: how many of the newest to show first) [default: 20 without --since, all with it]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -l agent -d 'Only this agent\'s sessions' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -l channel -d 'With --agent: only this channel\'s session' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -l thread -d 'With --agent and --channel: only this thread\'s session' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -s f -l follow -d 'Keep printing events as they are written, like tail -f'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -l json -d 'One JSON object per line'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -l all -d 'The whole store, whatever --agent/--channel/--thread or their environment variables say'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -f -a "prune" -d 'Delete events older than a duration, to bound the log'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and not __fish_seen_subcommand_from prune help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and __fish_seen_subcommand_from prune" -l older-than -d 'How old, e.g. 30d, 12h' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and __fish_seen_subcommand_from prune" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and __fish_seen_subcommand_from prune" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and __fish_seen_subcommand_from prune" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and __fish_seen_subcommand_from prune" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and __fish_seen_subcommand_from prune" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and __fish_seen_subcommand_from help" -f -a "prune" -d 'Delete events older than a duration, to bound the log'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand events; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand stats" -l agent -d 'Only this agent\'s sessions' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand stats" -l channel -d 'With --agent: only this channel\'s session' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand stats" -l thread -d 'With --agent and --channel: only this thread\'s session' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand stats" -l since -d 'Only calls this recent, e.g. 7d, 12h' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand stats" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand stats" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand stats" -l all -d 'The whole store, whatever --agent/--channel/--thread or their environment variables say'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand stats" -l json -d 'Print a JSON object with the same figures'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand stats" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand stats" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand stats" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand doctor" -l side-concurrency -d 'Side calls that run at once on this host, counted across every worker, `jobs run` and `--wait-side` turn (1 to 64)' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand doctor" -l db -d 'The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]' -r
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand doctor" -l claude -d 'The claude executable [default: `claude` on PATH]' -r -F
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand doctor" -l json -d 'Print a JSON object'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand doctor" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand doctor" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand completions" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand completions" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand completions" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand man" -s v -l verbose -d 'Log what happens to stderr (-vv for more)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand man" -s q -l quiet -d 'Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand man" -s h -l help -d 'Print help'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "turn" -d 'Run one turn: send MESSAGE (or stdin) and print the reply as it arrives'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "id" -d 'Print the session\'s deterministic id'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "pin" -d 'Read or edit the session\'s pinned task'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "facts" -d 'List, search and edit an agent\'s key facts'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "history" -d 'Show a session\'s stored turns, failed ones with their reason'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "sessions" -d 'Inspect and remove stored sessions'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "jobs" -d 'The side-call jobs (pin, facts, summaries): list, run, retry'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "prompt" -d 'Dry run: print exactly what `turn` would send, without calling or writing anything'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "store" -d 'Move a store between engines: a SQLite file and a PostgreSQL server'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "forget" -d 'Erase a person: their facts, their messages and the replies to them (as tombstones), pin revisions, summaries and side-call jobs that quote them, and claude\'s transcripts of the sessions touched'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "events" -d 'The memory\'s event feed: turns, pins, facts, compactions, failed side calls, drift and corrections, one per line'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "stats" -d 'What the conversations cost: tokens, cache reads, side calls\' share, injected memory'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "doctor" -d 'Check claude, the Messages API and the store, and say what is wrong'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "completions" -d 'Print a shell completion script'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "man" -d 'Print the man page (roff) of the program, or of a subcommand: `man facts list`'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and not __fish_seen_subcommand_from turn id pin facts history sessions jobs prompt store forget events stats doctor completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from pin" -f -a "show" -d 'Print the pinned task (nothing if there is none)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from pin" -f -a "set" -d 'Replace the pinned task (at most 1,000 characters)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from pin" -f -a "append" -d 'Add your words as a `[+]` line to the pinned task, verbatim (the pin stays within 1,000 characters)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from pin" -f -a "clear" -d 'Remove the pinned task'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from pin" -f -a "history" -d 'List the pin\'s kept revisions, oldest first: revision, time, source (turn), pin'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from pin" -f -a "restore" -d 'Bring back a kept revision of the pin (`pin history` lists them)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from facts" -f -a "list" -d 'List the facts, most used first: id, uses, person (- for agent-wide), text'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from facts" -f -a "search" -d 'Rank facts against a query, as a turn would'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from facts" -f -a "add" -d 'Add a fact by hand and print its id'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from facts" -f -a "forget" -d 'Delete facts by id (from `facts list`), leaving nothing recoverable in the store'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from facts" -f -a "import" -d 'Import facts from JSON Lines; duplicates and secrets are skipped, a bad line imports nothing'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from facts" -f -a "export" -d 'Export the agent\'s facts as JSON Lines (with --user: that person\'s and the agent-wide ones)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from facts" -f -a "enrich" -d 'Write search keywords for facts that have none (imported or older facts), by batched side calls'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from sessions" -f -a "list" -d 'List sessions (id, agent, channel, thread, turns, last used), most recently used first'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from sessions" -f -a "show" -d 'Show one session: key, handle, pin, summary, size, pending side calls'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from sessions" -f -a "rm" -d 'Delete sessions by id: their turns, pin, jobs and claude\'s transcripts, leaving nothing recoverable'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from sessions" -f -a "prune" -d 'Delete (as `rm` does) sessions not used for longer than a duration; prints their ids'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from jobs" -f -a "list" -d 'List open, failed and recently finished jobs: id, kind, status, attempts, session, error, why it waits'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from jobs" -f -a "run" -d 'Run the runnable jobs now, in the foreground (e.g. from cron), and print a summary'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from jobs" -f -a "retry" -d 'Make a job runnable again, with a fresh set of attempts'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from jobs" -f -a "work" -d 'The detached worker a turn starts (not for people)'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from store" -f -a "copy" -d 'Copy sessions (pins, summaries, history) and facts into another store'
complete -c duduclaw-session -n "__fish_duduclaw_session_using_subcommand help; and __fish_seen_subcommand_from events" -f -a "prune" -d 'Delete events older than a duration, to bound the log'
