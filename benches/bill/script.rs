//! The conversations the bill is taken on: the messages a person types and
//! the replies the stand-in gives as the main model, the same on both sides.
//!
//! The first two are written out (a migration from Create React App to Vite,
//! the kind of task people bring to Claude Code); the long ones are built
//! from word lists with a seeded PRNG, so every run sends the same bytes.
//! Replies are assembled from a coding assistant's usual report sentences
//! and code blocks: only their length and whether they end by asking
//! something matter to the bill.

use duduclaw_session::internals::memory::clarify;
use duduclaw_session::internals::memory::compact::DEFAULT_THRESHOLD;
use duduclaw_session::internals::text::estimate_tokens;

use crate::common::Rng;

/// One turn: what the person sends, and what the main model answers.
pub(crate) struct Exchange {
    pub message: String,
    /// Files sent with the message (`turn --attach`), from `benches/bill/`.
    pub attach: Vec<&'static str>,
    pub reply: String,
}

pub(crate) struct Conversation {
    /// What `BILL_ONLY` selects it by.
    pub name: &'static str,
    /// The table's description.
    pub about: String,
    pub exchanges: Vec<Exchange>,
    /// `false`: our side runs `turn --no-extract` (the control).
    pub memory: bool,
    /// What our side's agent knows before the first turn: facts as `facts
    /// import` reads them (JSON Lines), or nothing.
    pub facts: String,
    pub target: Target,
}

/// Where the ratio (ours / bare claude) must fall: issue 30's targets, and
/// the control's tolerance.
pub(crate) struct Target {
    pub within: std::ops::RangeInclusive<f64>,
    pub label: &'static str,
}

impl Target {
    /// At most 10% more than bare claude.
    fn overhead() -> Target {
        Target {
            within: 0.0..=1.10,
            label: "≤ 1.10×",
        }
    }

    pub(crate) fn met(&self, ratio: f64) -> bool {
        self.within.contains(&ratio)
    }
}

impl Conversation {
    /// Estimated tokens of every message and reply, as compaction counts them.
    pub(crate) fn estimated_tokens(&self) -> usize {
        self.exchanges
            .iter()
            .map(|e| estimate_tokens(&e.message) + estimate_tokens(&e.reply))
            .sum()
    }

    /// How many replies end with a question, as the clarify gate reads them.
    pub(crate) fn questions(&self) -> usize {
        self.exchanges
            .iter()
            .filter(|e| clarify::question(&e.reply).is_some())
            .count()
    }

    /// How many messages the clarify gate lets through: an answer to the
    /// question the reply before it ends with.
    pub(crate) fn answers(&self) -> usize {
        self.exchanges
            .windows(2)
            .filter(|w| clarify::gate(&w[0].reply, &w[1].message).is_some())
            .count()
    }
}

/// All of them, in the order they run and print.
pub(crate) fn all() -> Vec<Conversation> {
    vec![
        plain(),
        images(),
        questions(),
        long(),
        recurring(),
        known(),
        control(),
        compaction(),
    ]
}

/// The plain conversation by an agent that already holds 200 facts, a third
/// of them standing (issue 37): the profile rides in the system prompt from
/// the first turn, and the facts ranked for each message in it.
fn known() -> Conversation {
    let facts = known_facts(200);
    let standing = facts.iter().filter(|f| f.1).count();
    assert_eq!(standing, 67, "a third standing");
    let mut lines = String::new();
    for (content, standing, keywords) in &facts {
        let line =
            serde_json::json!({ "content": content, "standing": standing, "keywords": keywords });
        lines.push_str(&format!("{line}\n"));
    }
    Conversation {
        name: "known",
        about: "the plain one by an agent holding 200 facts, 67 standing".into(),
        facts: lines,
        target: Target {
            within: 0.0..=1.15,
            label: "≤ 1.15×",
        },
        ..plain()
    }
}

/// `n` facts from the recall sets, a third standing: set D's 165 (55
/// standing), then set A-C's first standing and ordinary facts to make up
/// the rest. (content, standing, keywords)
fn known_facts(n: usize) -> Vec<(String, bool, Vec<String>)> {
    let read = |file: &str| -> Vec<(String, bool, Vec<String>)> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/recall")
            .join(file);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("a recall fact");
                let keywords = v["keywords"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect();
                (
                    v["fact"].as_str().expect("fact").to_string(),
                    v["standing"].as_bool().unwrap_or(false),
                    keywords,
                )
            })
            .collect()
    };
    let mut facts = read("facts-d.jsonl");
    let others = read("facts.jsonl");
    let want_standing = n.div_ceil(3) - facts.iter().filter(|f| f.1).count();
    let want_ordinary = n - facts.len() - want_standing;
    facts.extend(others.iter().filter(|f| f.1).take(want_standing).cloned());
    facts.extend(others.iter().filter(|f| !f.1).take(want_ordinary).cloned());
    facts
}

/// Twenty turns whose replies ask nothing: the pin is the only memory
/// change, so this shows what the memory costs at its quietest.
fn plain() -> Conversation {
    asking_nothing(
        "plain",
        "20 turns, replies that ask nothing",
        written(&PLAIN, 1),
    )
}

/// The written messages, each with a scripted report of 600 to 1,500
/// characters for its reply (`seed` picks the reports).
fn written(messages: &[&str], seed: u64) -> Vec<Exchange> {
    let mut r = Rng::new(seed);
    messages
        .iter()
        .map(|m| Exchange {
            message: m.to_string(),
            attach: Vec::new(),
            reply: report(&mut r, 600..1500, 3),
        })
        .collect()
}

/// A conversation with the memory on whose replies ask nothing.
fn asking_nothing(name: &'static str, about: &str, exchanges: Vec<Exchange>) -> Conversation {
    let c = Conversation {
        name,
        about: about.into(),
        exchanges,
        memory: true,
        facts: String::new(),
        target: Target::overhead(),
    };
    assert_eq!(c.questions(), 0, "a reply of the {name} conversation asks");
    c
}

/// Twelve turns about a failing deploy, two of whose messages carry a
/// screenshot (issue 52): claude keeps each image in its transcript, so
/// both sides send it again on every later turn, from the cache. Each PNG
/// (1280×720 and 1280×800, flat stripes) is sized so the stand-in's rule
/// (bytes of base64 / 4) counts it about as the API does (width × height /
/// 750): 1,288 against 1,229 tokens and 1,436 against 1,365.
fn images() -> Conversation {
    let mut exchanges = written(&IMAGES, 6);
    exchanges[0].attach = vec!["ci-failure.png"];
    exchanges[4].attach = vec!["dashboard.png"];
    asking_nothing(
        "images",
        "12 turns, two messages with a screenshot",
        exchanges,
    )
}

/// Twenty turns where nine replies end with a question the next message
/// answers: nine clarify calls, nine pin changes and a consolidation.
fn questions() -> Conversation {
    let mut exchanges = written(&QUESTIONS, 2);
    for (i, q) in ASKED.iter().enumerate() {
        let reply = &mut exchanges[2 * i].reply;
        reply.push_str("\n\n");
        reply.push_str(q);
    }
    let c = Conversation {
        name: "questions",
        about: format!(
            "20 turns, {} replies ask a question the next message answers",
            ASKED.len()
        ),
        exchanges,
        memory: true,
        facts: String::new(),
        target: Target::overhead(),
    };
    assert!(
        c.questions() == ASKED.len() && c.answers() == ASKED.len(),
        "the clarify gate no longer reads the scripted questions and answers as such: revisit QUESTIONS and ASKED"
    );
    c
}

/// Sixty turns with replies of two to three thousand characters, staying
/// under the compaction threshold.
fn long() -> Conversation {
    let mut r = Rng::new(3);
    let exchanges = (0..60)
        .map(|i| Exchange {
            message: pipeline_message(&mut r, i),
            attach: Vec::new(),
            reply: report(&mut r, 2000..2700, 2),
        })
        .collect();
    let c = Conversation {
        name: "long",
        about: "60 turns, long replies".into(),
        exchanges,
        memory: true,
        facts: String::new(),
        target: Target::overhead(),
    };
    assert!(
        c.estimated_tokens() < DEFAULT_THRESHOLD && c.questions() == 0,
        "the long conversation must ask nothing and stay under the compaction threshold"
    );
    c
}

/// Twenty turns that keep coming back to the same service: the facts the
/// first messages state rank again for many later ones, so this is where
/// not injecting a fact the handle's transcript already holds can save
/// anything (on the others no fact ranks for two messages of a handle).
fn recurring() -> Conversation {
    asking_nothing(
        "recurring",
        "20 turns that keep returning to one service's deploys",
        written(&RECURRING, 4),
    )
}

/// The plain conversation without any memory: both sides send the same
/// requests, so anything but 1.00× is the instrument's error.
fn control() -> Conversation {
    Conversation {
        name: "control",
        about: "the plain one with `--no-extract` (no memory)".into(),
        memory: false,
        facts: String::new(),
        target: Target {
            within: 0.995..=1.005,
            label: "1.00× (±0.5%)",
        },
        ..plain()
    }
}

/// Replies of seven to nine thousand characters until the conversation
/// holds twice the default compaction threshold (estimated tokens), so our
/// side compacts at least once.
fn compaction() -> Conversation {
    let mut r = Rng::new(5);
    let mut c = Conversation {
        name: "compaction",
        about: String::new(),
        exchanges: Vec::new(),
        memory: true,
        facts: String::new(),
        target: Target {
            within: 0.0..=1.00,
            label: "≤ 1.00×",
        },
    };
    while c.estimated_tokens() < 2 * DEFAULT_THRESHOLD {
        let i = c.exchanges.len();
        c.exchanges.push(Exchange {
            message: pipeline_message(&mut r, i),
            attach: Vec::new(),
            reply: report(&mut r, 7000..9000, 1),
        });
    }
    assert_eq!(
        c.questions(),
        0,
        "a reply of the compaction conversation asks"
    );
    c.about = format!(
        "{} turns to twice the compaction threshold ({}k estimated tokens)",
        c.exchanges.len(),
        c.estimated_tokens() / 1000
    );
    c
}

const PLAIN: [&str; 20] = [
    "I want to move our billing dashboard from Create React App to Vite. Keep every Jest test passing, do not touch the auth flow under src/auth, and keep the build output in build/ because our nginx config serves that folder. We use pnpm, never npm. Start with a plan.",
    "The plan looks right. Go ahead with step one: add Vite and the React plugin, and move index.html to the project root.",
    "ok",
    "Our environment variables are all prefixed REACT_APP_ today, and the deploy pipeline in GitHub Actions injects them at build time.",
    "Rename them to the VITE_ prefix then, and update the workflow file in .github/workflows/deploy.yml as well.",
    "The SVG imports as React components break now. We use them all over src/components/icons.",
    "go on",
    "Jest still runs through react-scripts. Move it to plain Jest with babel-jest; the team decided to switch to Vitest only in Q3.",
    "Two tests fail with 'document is not defined' in src/reports/__tests__ after that change.",
    "ok, that fixed it",
    "We also register a service worker in src/serviceWorker.js for offline reports, and it must keep working after the migration.",
    "Next the dev proxy: in development we send /api to localhost:8080 through the proxy field in package.json.",
    "Now the absolute imports. We import from 'components/...' everywhere thanks to baseUrl src in jsconfig.json.",
    "thanks",
    "Compare the bundle size with the last CRA build. Our budget is 350 kB gzipped for the main chunk.",
    "Split the charts library into a chunk of its own then.",
    "Update the development section of the README for the new commands.",
    "Remove react-scripts and everything else that only CRA needed from package.json.",
    "Run the whole suite one last time and list every file this migration changed.",
    "great, write the pull request description",
];

const IMAGES: [&str; 12] = [
    "Here is the CI run that fails on the release branch since this morning. The deploy job of the payments API stops at the smoke test. We deploy with GitHub Actions to our staging cluster, never straight to production. What does the screenshot tell you?",
    "The smoke test calls /health on the new pods and expects 200 within 90 seconds.",
    "Where do I find the pod logs from the failed run?",
    "ok, the logs say the database migration timed out after 60 seconds.",
    "This is the Grafana dashboard of the staging database during the run. Do you see anything unusual?",
    "The migration adds an index on the transactions table, which holds about 40 million rows.",
    "Can we build the index concurrently so the table stays writable?",
    "go on",
    "How long should the smoke test wait then? The product team wants deploys under 15 minutes.",
    "Write the change to the workflow file .github/workflows/deploy.yml.",
    "thanks",
    "Summarize the incident for the team channel in five lines.",
];

const RECURRING: [&str; 20] = [
    "We deploy the billing service with Argo CD from the deploy repository. Help me move its staging deploys to the new cluster.",
    "Our staging cluster for the billing service is staging-eu-2, and we always deploy to it before production.",
    "We never deploy the billing service on Fridays, and our on-call channel for it is #billing-oncall.",
    "Our billing service reads its database password from Vault at secret/billing/db.",
    "Show me the Argo CD application manifest for the billing service on staging-eu-2.",
    "The billing service deploy on staging fails its health check after the sync.",
    "Which Vault path does the billing service read its database password from on staging?",
    "Add a readiness probe to the billing service deployment so Argo CD waits for it.",
    "Post a note in the on-call channel before the next billing service deploy.",
    "The staging deploy of the billing service is green now. What is next before production?",
    "Can we deploy the billing service to production tomorrow? Check our deploy rules.",
    "Write the Argo CD sync policy for the billing service: automated on staging, manual on production.",
    "The billing service deploy needs the Vault secret on production too; which path do we use?",
    "Draft the rollback steps for a failed billing service deploy with Argo CD.",
    "Which cluster do we deploy the billing service to first, and why?",
    "Add an alert to the on-call channel when a billing service deploy fails its health check.",
    "List what changed in the billing service deploy manifests today.",
    "Check the deploy calendar: the billing service release is planned for Friday afternoon.",
    "Move it then, and tell the on-call channel about the new billing service deploy date.",
    "Write the summary of today's billing service deploy work for the team.",
];

/// The messages of the conversation with questions: each even one (the
/// 2nd, 4th, ... 18th) answers the question of the reply before it.
const QUESTIONS: [&str; 20] = [
    "Migrate the admin console from Create React App to Vite. Keep the Jest suite green, leave the login flow in src/auth alone, and use pnpm for everything. Begin with the Vite config.",
    "Keep build/, our nginx config serves that folder and I do not want to touch the infrastructure in this change.",
    "Start with the Vite config and the React plugin, and move index.html to the project root.",
    "Keep the old names through envPrefix for now; the mobile team reads the same .env files.",
    "Next, the SVG icons under src/components/icons, which we import as React components.",
    "Keep Jest. The switch to Vitest is planned for Q3, together with the other frontend repos.",
    "Now look at the two tests in src/reports/__tests__ that fail with 'document is not defined'.",
    "Yes, offline reports must keep working exactly as today, our field staff rely on them.",
    "Move on to the dev proxy for /api.",
    "Port 8080, and add /ws for the websocket notifications as well.",
    "Next the absolute imports from 'components/...' that rely on baseUrl in jsconfig.json.",
    "Yes, split it out; time to interactive on the dashboard matters more than the first load.",
    "Compare the bundle size with the last CRA build.",
    "Delete them now, we tag a release right after this merges.",
    "Update the development section of the README for the new commands.",
    "Update the Dockerfile too, but leave the nginx stage exactly as it is.",
    "Remove react-scripts and the rest of the CRA-only packages.",
    "Node 20, the same as production.",
    "Run the whole suite one last time and list every changed file.",
    "good, now write the pull request description",
];

/// What the 1st, 3rd, ... 17th replies of that conversation end with.
const ASKED: [&str; 9] = [
    "Should the build output stay in build/, or may it move to dist/, which is Vite's default?",
    "Do you want the REACT_APP_ variables renamed to VITE_, or should I keep the old names through envPrefix?",
    "Should I move the tests to Vitest while I am at it, or keep Jest?",
    "The service worker comes from the CRA template; should offline mode keep working exactly as it does today?",
    "Should the proxy keep pointing at port 8080, and does anything besides /api go through it?",
    "Do you want the charts library split into a chunk of its own, even though the first load makes one more request?",
    "Should I delete the old CRA config files now, or leave them until the next release?",
    "The Dockerfile still calls react-scripts build; shall I update it too?",
    "Which Node version should CI use for the new toolchain?",
];

const PIPELINE_TASK: &str = "We are building the nightly export of the billing warehouse to the finance team's S3 bucket. The job is written in Python 3.12 with Polars, runs on Airflow 2.9, and must finish before 06:00 Asia/Taipei. Never write to the production bucket from a laptop; everything goes through the staging DAG first. Start by reading dags/billing_export.py and tell me how it is structured.";

const COMPONENTS: &[&str] = &[
    "the extract step",
    "the currency conversion",
    "the partition writer",
    "the retry wrapper",
    "the schema check",
    "the S3 uploader",
    "the Slack notifier",
    "the late-data handler",
    "the dedup pass",
    "the invoice join",
];
const FEATURES: &[&str] = &[
    "a dry-run flag",
    "structured logging",
    "a row-count check against the ledger",
    "idempotent re-runs",
    "a metrics export for Grafana",
    "backfill support for a date range",
    "a setting for the bucket name",
    "gzip compression of the output",
];
const ERRORS: &[&str] = &[
    "KeyError: 'currency'",
    "a timeout after 900 seconds",
    "duplicate rows in the March partition",
    "AccessDenied on PutObject",
    "a schema mismatch in the amount column",
];
const PLACES: &[&str] = &[
    "staging",
    "the backfill cluster",
    "the 02:00 run",
    "a fresh checkout",
];
const TEAMS: &[&str] = &["finance", "data platform", "billing"];
const DAYS: &[&str] = &["Mondays", "Tuesdays", "Wednesdays", "Thursdays"];
const PRACTICES: &[&str] = &[
    "run a backfill of one day of data",
    "compare the row counts with the ledger",
    "tag the DAG version",
    "ask the finance team for a sign-off",
];
const GOALS: &[&str] = &[
    "it can be tested without S3",
    "its retries are configurable",
    "each partition is written atomically",
    "it logs one line per partition",
];
const SITUATIONS: &[&str] = &[
    "a late invoice",
    "a missing exchange rate",
    "a partial upload",
    "the switch to daylight saving time in the source system",
];
const SHORT: &[&str] = &["ok", "continue", "looks good, go on", "thanks, next one"];

/// The `i`th message of the pipeline conversations: the task first, then
/// follow-ups, every fifth a short one; some state lasting facts.
fn pipeline_message(r: &mut Rng, i: usize) -> String {
    if i == 0 {
        return PIPELINE_TASK.into();
    }
    if i % 5 == 4 {
        return r.pick(SHORT).into();
    }
    match r.below(7) {
        0 => format!(
            "Add {} to {}, with a test next to the existing ones.",
            r.pick(FEATURES),
            r.pick(COMPONENTS)
        ),
        1 => format!(
            "{} fails on {} with {}. Find the cause and fix it.",
            capitalized(r.pick(COMPONENTS)),
            r.pick(PLACES),
            r.pick(ERRORS)
        ),
        2 => format!(
            "Our {} team owns {} and reviews every change to it on {}.",
            r.pick(TEAMS),
            r.pick(COMPONENTS),
            r.pick(DAYS)
        ),
        3 => format!(
            "We always {} before merging a change to the export. Keep that in mind for the next steps.",
            r.pick(PRACTICES)
        ),
        4 => format!("Refactor {} so that {}.", r.pick(COMPONENTS), r.pick(GOALS)),
        5 => format!(
            "Explain how {} handles {}, and change it if it loses data.",
            r.pick(COMPONENTS),
            r.pick(SITUATIONS)
        ),
        _ => format!(
            "Write the runbook entry for {}: what the on-call person checks first and how to re-run the night.",
            r.pick(SITUATIONS)
        ),
    }
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

const OPENINGS: &[&str] = &[
    "Done.",
    "That is in place now.",
    "I made the change and ran the affected tests.",
    "Here is what I changed.",
    "I read through the code paths this touches before changing anything.",
    "Finished; the details are below.",
];
const SENTENCES: &[&str] = &[
    "The configuration now lives in one file, so the next change only has to touch that place.",
    "I kept the public interface as it was, so nothing that calls this code has to change.",
    "Two helper functions were doing the same work; I merged them into one and updated both callers.",
    "The tests that cover this path pass, and I added one for the case that was not covered before.",
    "I checked the git history of this file first: the odd ordering was deliberate, so I kept it.",
    "The lockfile changed only for the packages named here; nothing else was upgraded along the way.",
    "Logging stays at the info level for normal runs and says which input it was working on when it fails.",
    "Error handling is explicit now: a failure names the file and the step instead of a bare stack trace.",
    "I left a short comment where the behaviour is surprising, saying why it is that way.",
    "The old code path is still there behind the flag, so we can compare both outputs on real data.",
    "Running the suite locally takes about the same time as before, a little under two minutes.",
    "The type checker is clean, and the linter reports nothing new in the files I touched.",
    "One import was only used by the code I removed, so it is gone as well.",
    "The documentation comment at the top of the module describes the new flow in three sentences.",
    "I did not touch the parts you asked me to leave alone; the diff stays out of those folders.",
    "For the record, the slow part was the network call, not the parsing, so I left the parser alone.",
    "The change is small enough to review in one sitting: four files, about ninety lines in all.",
    "I ran the build twice from a clean checkout to make sure nothing depends on a cached artifact.",
    "Where the old code swallowed an error, the new code logs it and carries on, as before, but visibly.",
    "The fixture data in the tests now matches the shape of the production data more closely.",
];
const SNIPPETS: &[&str] = &[
    "```ts\nimport { defineConfig } from 'vite'\nimport react from '@vitejs/plugin-react'\n\nexport default defineConfig({\n  plugins: [react()],\n  build: { outDir: 'build', sourcemap: true },\n  server: { port: 3000 },\n})\n```",
    "```diff\n-    \"start\": \"react-scripts start\",\n-    \"build\": \"react-scripts build\",\n+    \"start\": \"vite\",\n+    \"build\": \"vite build\",\n+    \"preview\": \"vite preview\",\n```",
    "```python\ndef write_partition(frame: pl.DataFrame, day: date, bucket: str) -> None:\n    key = f\"exports/billing/{day:%Y/%m/%d}/part-0.parquet\"\n    tmp = key + \".tmp\"\n    upload(frame.write_parquet, bucket, tmp)\n    rename(bucket, tmp, key)\n    log.info(\"wrote %s rows to %s\", frame.height, key)\n```",
    "```yaml\n- name: Build\n  run: pnpm build\n  env:\n    VITE_API_URL: ${{ vars.API_URL }}\n    VITE_SENTRY_DSN: ${{ secrets.SENTRY_DSN }}\n```",
    "```text\nsrc/vite.config.ts            | 14 ++++++++++++++\nsrc/index.html                |  3 ++-\npackage.json                  | 12 ++++++------\n.github/workflows/deploy.yml  |  4 ++--\n4 files changed, 25 insertions(+), 8 deletions(-)\n```",
    "```python\n@retry(times=settings.retries, backoff=settings.backoff_seconds)\ndef fetch_rates(day: date) -> dict[str, Decimal]:\n    rows = warehouse.query(RATES_SQL, day=day)\n    if not rows:\n        raise MissingRates(day)\n    return {r.currency: r.rate for r in rows}\n```",
];
const CLOSINGS: &[&str] = &[
    "Next I will run the whole suite again and report anything that changed.",
    "Nothing else needs to change for this step.",
    "That completes this step; the next one builds on it.",
    "Everything is committed on the working branch, ready for review.",
];

/// A reply of a length picked from `chars`: an opening, paragraphs of
/// report sentences with a code block after every `code_every` paragraphs,
/// and a closing that asks nothing.
fn report(r: &mut Rng, chars: std::ops::Range<usize>, code_every: usize) -> String {
    let chars = chars.start + r.below(chars.len());
    let mut out = r.pick(OPENINGS).to_string();
    let mut paragraphs = 0;
    while out.chars().count() < chars {
        out.push_str("\n\n");
        let sentences: Vec<&str> = (0..3).map(|_| r.pick(SENTENCES)).collect();
        out.push_str(&sentences.join(" "));
        paragraphs += 1;
        if paragraphs % code_every == 0 {
            out.push_str("\n\n");
            out.push_str(r.pick(SNIPPETS));
        }
    }
    out.push_str("\n\n");
    out.push_str(r.pick(CLOSINGS));
    out
}
