//! `stats`: what the conversations cost, from the calls the store recorded:
//! the turns' own calls (fresh, cache-written and cache-read input, output,
//! cost) beside the side calls that keep the memory, and the memory injected.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::args::{Scope, StoreArgs, parse_age};
use super::{open_for_reading, scope_session};
use crate::backend::models;
use crate::store::{self, CacheUse, CallFilter, CallKind, CallRow, Location};

/// Input tokens split the way the API bills them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Input")]
pub(super) struct InputTokens {
    pub fresh: u64,
    pub cache_written: u64,
    pub cache_read: u64,
    pub total: u64,
}

/// The figures of a set of calls.
#[derive(Debug, Default, Clone, PartialEq, Serialize, JsonSchema)]
pub(super) struct Figures {
    pub calls: u64,
    pub input_tokens: InputTokens,
    /// Of all input, the part read from the prompt cache.
    pub cache_read_share: Option<f64>,
    pub output_tokens: u64,
    /// The known costs, summed.
    pub cost_usd: f64,
    /// Calls whose model has no known price (their cost is not in `cost_usd`).
    pub calls_without_cost: u64,
}

impl Figures {
    fn add(&mut self, c: &CallRow) {
        let u = c.usage;
        self.calls += 1;
        self.input_tokens.fresh += u.input_tokens;
        self.input_tokens.cache_written += u.cache_creation_input_tokens;
        self.input_tokens.cache_read += u.cache_read_input_tokens;
        self.input_tokens.total += u.input_total();
        self.output_tokens += u.output_tokens;
        match c.cost_usd {
            Some(cost) => self.cost_usd += cost,
            None => self.calls_without_cost += 1,
        }
        self.cache_read_share = share(self.input_tokens.cache_read, self.input_tokens.total);
    }

    fn tokens(&self) -> u64 {
        self.input_tokens.total + self.output_tokens
    }
}

#[allow(clippy::cast_precision_loss)]
fn share(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

#[allow(clippy::cast_precision_loss)]
fn share_f(part: f64, whole: f64) -> Option<f64> {
    (whole > 0.0).then(|| part / whole)
}

/// The side calls: the memory's overhead.
#[derive(Debug, Default, Clone, PartialEq, Serialize, JsonSchema)]
pub(super) struct Side {
    #[serde(flatten)]
    pub figures: Figures,
    pub by_kind: BTreeMap<String, Figures>,
    /// Side calls' cost over all calls' cost.
    pub share_of_cost: Option<f64>,
    /// Side calls' tokens (input and output) over all calls' tokens.
    pub share_of_tokens: Option<f64>,
}

/// The memory injected into the turns.
#[derive(Debug, Default, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Memory")]
pub(super) struct InjectedMemory {
    /// Estimated tokens of pin, recap and facts, summed over the turns.
    pub injected_tokens: u64,
    /// Of the turns' input.
    pub share_of_input: Option<f64>,
}

/// What the memory costs, in the bill's own terms: the side calls, the
/// cache writes of turns whose system prompt changed while the prompt cache
/// was warm (the whole conversation written again), and the injected text.
#[derive(Debug, Default, Clone, PartialEq, Serialize, JsonSchema)]
pub(super) struct Bill {
    pub side_calls_usd: f64,
    /// Main calls whose system prompt changed while the cache was warm.
    pub rewritten_turns: u64,
    /// Their cache writes.
    pub rewrites_usd: f64,
    /// The injected pin, recap and facts, priced as cache writes (each is
    /// written once; its later reads are not counted).
    pub injected_usd: f64,
    pub memory_usd: f64,
    /// Of the whole bill.
    pub share_of_cost: Option<f64>,
}

/// Everything `stats` reports.
#[derive(Debug, Default, Clone, PartialEq, Serialize, JsonSchema)]
pub(super) struct Stats {
    pub turns: u64,
    pub main: Figures,
    pub side_calls: Side,
    pub memory: InjectedMemory,
    pub memory_bill: Bill,
    pub cost_usd: f64,
    pub by_path: BTreeMap<String, Figures>,
}

/// What `tokens` of a main call cost as cache writes: from the model's
/// price when known, else as their part of the call's own cost at the
/// API's ratios (input 1, cache write 1.25, cache read 0.1, output 5).
#[allow(clippy::cast_precision_loss)]
fn as_cache_writes(c: &CallRow, tokens: u64) -> f64 {
    if let Some(p) = c.model.as_deref().and_then(models::prices) {
        return tokens as f64 * p.cache_write / 1e6;
    }
    let u = c.usage;
    let weight = u.input_tokens as f64
        + 1.25 * u.cache_creation_input_tokens as f64
        + 0.1 * u.cache_read_input_tokens as f64
        + 5.0 * u.output_tokens as f64;
    match c.cost_usd {
        Some(cost) if weight > 0.0 => cost * (1.25 * tokens as f64 / weight).min(1.0),
        _ => 0.0,
    }
}

impl Stats {
    pub(super) fn of(calls: &[CallRow]) -> Stats {
        let mut s = Stats::default();
        for c in calls {
            if c.kind == CallKind::Main {
                s.main.add(c);
                s.memory.injected_tokens += c.memory_tokens;
                s.memory_bill.injected_usd += as_cache_writes(c, c.memory_tokens);
                if c.cache == Some(CacheUse::Rewritten) {
                    s.memory_bill.rewritten_turns += 1;
                    s.memory_bill.rewrites_usd +=
                        as_cache_writes(c, c.usage.cache_creation_input_tokens);
                }
                s.by_path.entry(c.path.to_string()).or_default().add(c);
            } else {
                s.side_calls.figures.add(c);
                s.side_calls
                    .by_kind
                    .entry(c.kind.to_string())
                    .or_default()
                    .add(c);
            }
        }
        s.turns = s.main.calls;
        s.cost_usd = s.main.cost_usd + s.side_calls.figures.cost_usd;
        s.side_calls.share_of_cost = share_f(s.side_calls.figures.cost_usd, s.cost_usd);
        s.side_calls.share_of_tokens = share(
            s.side_calls.figures.tokens(),
            s.side_calls.figures.tokens() + s.main.tokens(),
        );
        s.memory.share_of_input = share(s.memory.injected_tokens, s.main.input_tokens.total);
        let b = &mut s.memory_bill;
        b.side_calls_usd = s.side_calls.figures.cost_usd;
        b.memory_usd = b.side_calls_usd + b.rewrites_usd + b.injected_usd;
        b.share_of_cost = share_f(b.memory_usd, s.cost_usd);
        s
    }
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub scope: Scope,
    /// Only calls this recent, e.g. 7d, 12h
    #[arg(long, value_name = "DURATION", value_parser = parse_age)]
    pub since: Option<Duration>,
    /// Print a JSON object with the same figures
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub(super) fn run(location: &Location, args: &StatsArgs) -> Result<()> {
    let scope = &args.scope;
    let sid = scope_session(scope);
    let since = args
        .since
        .map(|d| store::now().saturating_sub(i64::try_from(d.as_secs()).unwrap_or(i64::MAX)));
    let calls = match open_for_reading(location)? {
        Some(store) => store.calls(&CallFilter {
            agent: scope.agent(),
            session_id: sid.as_deref(),
            since,
        })?,
        None => Vec::new(),
    };
    let stats = Stats::of(&calls);
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&stats)?)?;
    } else {
        table(&mut out, &stats)?;
    }
    Ok(())
}

fn pct(share: Option<f64>) -> String {
    share.map_or_else(|| "-".into(), |s| format!("{:.1}%", s * 100.0))
}

fn usd(f: &Figures) -> String {
    let known = format!("${:.4}", f.cost_usd);
    match f.calls_without_cost {
        0 => known,
        n => format!("{known} (+{n} unpriced)"),
    }
}

/// A plain table: the same figures, for a person (no colour, so pipes get
/// the same text as a terminal). Columns are wider than their longest
/// heading, so headings never run together.
fn table(out: &mut impl Write, s: &Stats) -> std::io::Result<()> {
    let row = |out: &mut dyn Write, name: &str, f: &Figures| -> std::io::Result<()> {
        writeln!(
            out,
            "{name:<14}{:>7}{:>13}{:>13}{:>13}{:>10}{:>10}  {}",
            f.calls,
            f.input_tokens.fresh,
            f.input_tokens.cache_written,
            f.input_tokens.cache_read,
            pct(f.cache_read_share),
            f.output_tokens,
            usd(f)
        )
    };
    writeln!(
        out,
        "{:<14}{:>7}{:>13}{:>13}{:>13}{:>10}{:>10}  cost",
        "calls", "n", "fresh in", "cache write", "cache read", "read %", "out"
    )?;
    row(out, "turns", &s.main)?;
    for (path, f) in &s.by_path {
        row(out, &format!("  via {path}"), f)?;
    }
    row(out, "side calls", &s.side_calls.figures)?;
    for (kind, f) in &s.side_calls.by_kind {
        row(out, &format!("  {kind}"), f)?;
    }
    writeln!(out)?;
    writeln!(out, "total cost            ${:.4}", s.cost_usd)?;
    writeln!(
        out,
        "side calls' share     {} of cost, {} of tokens",
        pct(s.side_calls.share_of_cost),
        pct(s.side_calls.share_of_tokens)
    )?;
    writeln!(
        out,
        "injected memory       {} tokens, {} of the turns' input",
        s.memory.injected_tokens,
        pct(s.memory.share_of_input)
    )?;
    let b = &s.memory_bill;
    writeln!(
        out,
        "memory: {} of the bill (${:.4}: side calls ${:.4}, cache rewrites ${:.4} in {} turn{}, injected text ${:.4})",
        pct(b.share_of_cost),
        b.memory_usd,
        b.side_calls_usd,
        b.rewrites_usd,
        b.rewritten_turns,
        if b.rewritten_turns == 1 { "" } else { "s" },
        b.injected_usd
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{CallPath, JobKind, Usage};

    fn call(
        kind: CallKind,
        path: CallPath,
        usage: Usage,
        cost: Option<f64>,
        memory: u64,
    ) -> CallRow {
        CallRow {
            kind,
            path,
            model: None,
            usage,
            cost_usd: cost,
            duration_ms: 1,
            memory_tokens: memory,
            cache: None,
        }
    }

    #[test]
    fn figures_add_up() {
        let u = |fresh, write, read, out| Usage {
            input_tokens: fresh,
            cache_creation_input_tokens: write,
            cache_read_input_tokens: read,
            output_tokens: out,
        };
        let calls = [
            call(
                CallKind::Main,
                CallPath::Cli,
                u(10, 100, 890, 50),
                Some(0.9),
                30,
            ),
            call(CallKind::Main, CallPath::Api, u(0, 0, 1000, 50), None, 20),
            call(
                CallKind::Side(JobKind::Pin),
                CallPath::Cli,
                u(100, 0, 0, 10),
                Some(0.05),
                0,
            ),
            call(
                CallKind::Side(JobKind::Facts),
                CallPath::Cli,
                u(100, 0, 0, 10),
                Some(0.05),
                0,
            ),
        ];
        let s = Stats::of(&calls);
        assert_eq!(s.turns, 2);
        assert_eq!(s.main.input_tokens.total, 2000);
        assert_eq!(s.main.cache_read_share, Some(0.945));
        assert_eq!(s.main.calls_without_cost, 1);
        assert!((s.cost_usd - 1.0).abs() < 1e-12);
        assert!((s.side_calls.share_of_cost.unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(s.side_calls.figures.calls, 2);
        assert_eq!(s.side_calls.by_kind["pin"].calls, 1);
        assert_eq!(s.memory.injected_tokens, 50);
        assert_eq!(s.memory.share_of_input, Some(0.025));
        assert_eq!(s.by_path["api"].calls, 1);
        let tokens = s.side_calls.share_of_tokens.unwrap();
        assert!((tokens - 220.0 / 2320.0).abs() < 1e-12, "{tokens}");
        let mut text = Vec::new();
        table(&mut text, &s).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("94.5%"), "{text}");
        assert!(text.contains("(+1 unpriced)"), "{text}");
        assert!(text.contains("10.0% of cost"), "{text}");
    }

    /// The memory's share of the bill counts the side calls, the cache
    /// writes of a turn that re-wrote a warm cache, and the injected text.
    #[test]
    fn the_memory_bill_counts_rewrites_and_injected_text() {
        let usage = Usage {
            input_tokens: 0,
            cache_creation_input_tokens: 1_000_000,
            cache_read_input_tokens: 0,
            output_tokens: 0,
        };
        let mut rewritten = call(CallKind::Main, CallPath::Cli, usage, Some(3.75), 100_000);
        rewritten.model = Some("claude-sonnet-4-6".into());
        rewritten.cache = Some(CacheUse::Rewritten);
        let mut kept = call(CallKind::Main, CallPath::Cli, usage, Some(3.75), 0);
        kept.cache = Some(CacheUse::Kept);
        let side = call(
            CallKind::Side(JobKind::Memory),
            CallPath::Cli,
            usage,
            Some(0.25),
            0,
        );
        let s = Stats::of(&[rewritten, kept, side]);
        let b = &s.memory_bill;
        assert_eq!(b.rewritten_turns, 1);
        assert!((b.rewrites_usd - 3.75).abs() < 1e-9, "{b:?}");
        assert!((b.injected_usd - 0.375).abs() < 1e-9, "{b:?}");
        assert!((b.memory_usd - 4.375).abs() < 1e-9, "{b:?}");
        assert!((b.share_of_cost.unwrap() - 4.375 / 7.75).abs() < 1e-9);
        let mut text = Vec::new();
        table(&mut text, &s).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("memory: 56.5% of the bill ($4.3750: side calls $0.2500, cache rewrites $3.7500 in 1 turn, injected text $0.3750)"),
            "{text}"
        );
        // Without a known price, the part of the call's own cost.
        let mut unknown = call(CallKind::Main, CallPath::Cli, usage, Some(2.0), 0);
        unknown.cache = Some(CacheUse::Rewritten);
        assert!((Stats::of(&[unknown]).memory_bill.rewrites_usd - 2.0).abs() < 1e-9);
    }

    #[test]
    fn nothing_recorded_is_zero_and_unknown_shares() {
        let s = Stats::of(&[]);
        assert_eq!(s.turns, 0);
        assert_eq!(s.main.cache_read_share, None);
        assert_eq!(s.side_calls.share_of_cost, None);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["main"]["cache_read_share"], serde_json::Value::Null);
        assert_eq!(v["side_calls"]["calls"], 0);
    }
}
