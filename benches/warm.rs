//! Warm claudes (issue 38): the later turns of one session through bare
//! `claude -p --resume` and through `duduclaw-session turn`, interleaved,
//! on a bare HOME and on one with a stand-in MCP server that takes 2 s to
//! connect; what the warm turns cost against cold ones (`--no-warm`) on the
//! same conversation; and the memory the host and its claudes hold.
//!
//! ```text
//! cargo bench --profile dev --bench warm
//! WARM_RUNS=15 cargo bench --profile dev --bench warm
//! ```
//!
//! Wall time is the whole process, start to exit, as a caller waits for it.
//! Each side has its own stand-in (no shared cache) and its own HOME.
//! Without `--bench` (`cargo test --benches`) it does nothing.

use bench_common as common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use standin::{Recorded, Reply, StandIn};

use common::drive::{
    MAIN_OUTPUT_FLAGS, claude_missing, clean_command, find_bin, find_claude, machine, timed,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("warm: measured with --bench (`cargo bench --profile dev --bench warm`)");
        return;
    }
    let Some(claude) = find_claude() else {
        println!("{}", claude_missing("warm"));
        return;
    };
    let bin = find_bin(&args, env!("CARGO_BIN_EXE_duduclaw-session"));
    let runs: usize = std::env::var("WARM_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    println!("# Warm claudes\n");
    println!("- machine: {}", machine());
    println!("- claude: {}", claude.display());
    println!("- duduclaw-session: {}", bin.display());
    println!(
        "- {runs} later turns per setup, interleaved: bare `claude -p --resume`, then `turn` (warm), then `turn --no-warm`\n"
    );
    println!("| HOME | bare claude (median ms) | turn, warm | ratio | turn --no-warm | ratio |");
    println!("|---|---|---|---|---|---|");
    let mut bills = Vec::new();
    for (name, mcp_delay) in [
        ("bare", None),
        ("an MCP server that takes 2 s to connect", Some(2.0)),
    ] {
        let m = interleaved(&claude, &bin, runs, mcp_delay);
        let (b, w, c) = (median(&m.bare), median(&m.warm), median(&m.cold));
        println!(
            "| {name} | {b:.0} | {w:.0} | **{:.2}×** | {c:.0} | {:.2}× |",
            w / b,
            c / b
        );
        bills.push((name, m.warm_bill, m.cold_bill, m.rss_kib));
    }
    println!(
        "\n| HOME | bill of the warm turns | of the --no-warm turns | ratio | RSS of the host and its claude |"
    );
    println!("|---|---|---|---|---|");
    for (name, warm, cold, rss) in bills {
        println!(
            "| {name} | {warm:.0} | {cold:.0} | {:.4} | {:.0} MiB |",
            warm / cold,
            rss as f64 / 1024.0
        );
    }
    println!(
        "\n(bill: the later turns' input priced at 1, cache writes 1.25, cache reads 0.1; the replies are the same text on both)"
    );
}

/// What one setup measured.
struct Measured {
    bare: Vec<f64>,
    warm: Vec<f64>,
    cold: Vec<f64>,
    warm_bill: f64,
    cold_bill: f64,
    rss_kib: u64,
}

/// One side: its stand-in, HOME and working folder.
struct Side {
    standin: StandIn,
    dir: tempfile::TempDir,
}

impl Side {
    fn new(mcp_delay: Option<f64>) -> Side {
        let standin = StandIn::start_with(|_: &Recorded| Reply::Text("Noted, carrying on.".into()));
        let dir = tempfile::tempdir().expect("temp dir");
        for d in ["home", "work", "tmp"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("folders");
        }
        if let Some(delay) = mcp_delay {
            let home = dir.path().join("home");
            let server = home.join("mcp.sh");
            std::fs::write(&server, standin::MCP_SERVER_SCRIPT).expect("mcp server");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
            let config = serde_json::json!({ "mcpServers": { "files": {
                "type": "stdio", "command": server,
                "env": { "MCP_DELAY": delay.to_string(), "MCP_LOG": home.join("mcp.log") }
            } } });
            std::fs::write(home.join(".claude.json"), config.to_string()).expect("config");
        }
        Side { standin, dir }
    }

    fn command(&self, program: &Path) -> Command {
        let p = self.dir.path();
        clean_command(
            program,
            &p.join("home"),
            &p.join("tmp"),
            &self.standin.base_url(),
            &p.join("work"),
        )
    }

    /// The bill of what the stand-in received since `from`.
    fn bill(&self, from: usize) -> f64 {
        self.standin.requests()[from..]
            .iter()
            .filter(|r| !r.is_side_call())
            .map(|r| {
                let u = &r.usage;
                u.input_tokens as f64
                    + 1.25 * u.cache_creation_input_tokens as f64
                    + 0.1 * u.cache_read_input_tokens as f64
            })
            .sum()
    }
}

fn interleaved(claude: &Path, bin: &Path, runs: usize, mcp_delay: Option<f64>) -> Measured {
    let bare = Side::new(mcp_delay);
    let warm = Side::new(mcp_delay);
    let cold = Side::new(mcp_delay);
    let id = "7e57a11e-0000-8000-8000-000000000001";
    let ours = |side: &Side, extra: &[&str], message: &str| -> f64 {
        let mut c = side.command(bin);
        c.env("DUDUCLAW_DB", side.dir.path().join("s.db"))
            .env("DUDUCLAW_CLAUDE", claude)
            .args([
                "turn",
                "--no-extract",
                "--agent",
                "bench",
                "--channel",
                "warm",
            ])
            .args(extra)
            .arg("-");
        let start = Instant::now();
        timed(&mut c, message);
        ms(start.elapsed())
    };
    let bare_turn = |how: &str, message: &str| -> f64 {
        let mut c = bare.command(claude);
        c.args(MAIN_OUTPUT_FLAGS).args([how, id]);
        let start = Instant::now();
        timed(&mut c, message);
        ms(start.elapsed())
    };
    // The first turn of each: a new conversation (and the warm claude's start).
    bare_turn("--session-id", "Let us plan the spring tea order together.");
    ours(&warm, &[], "Let us plan the spring tea order together.");
    ours(
        &cold,
        &["--no-warm"],
        "Let us plan the spring tea order together.",
    );
    let (warm_from, cold_from) = (warm.standin.requests().len(), cold.standin.requests().len());
    let mut m = Measured {
        bare: Vec::new(),
        warm: Vec::new(),
        cold: Vec::new(),
        warm_bill: 0.0,
        cold_bill: 0.0,
        rss_kib: 0,
    };
    for i in 0..runs {
        let message = format!("Point {i}: what should we weigh next?");
        m.bare.push(bare_turn("--resume", &message));
        m.warm.push(ours(&warm, &[], &message));
        m.cold.push(ours(&cold, &["--no-warm"], &message));
    }
    m.warm_bill = warm.bill(warm_from);
    m.cold_bill = cold.bill(cold_from);
    m.rss_kib = rss_of(&warm.dir.path().join("home"));
    kill_home(&warm.dir.path().join("home"));
    m
}

/// The resident memory of every process whose HOME is `home` (the host
/// and its claudes, with their helpers), in KiB.
fn rss_of(home: &Path) -> u64 {
    processes(home)
        .iter()
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        })
        .sum()
}

fn processes(home: &Path) -> Vec<u32> {
    let needle = format!("HOME={}", home.display());
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == needle.as_bytes()))
        })
        .collect()
}

fn kill_home(home: &Path) {
    for _ in 0..50 {
        let pids = processes(home);
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}
