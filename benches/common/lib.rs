//! Benchmark data shared by `core` and `e2e`: realistic, varied key facts in
//! English and Traditional Chinese, generated deterministically from word
//! lists with a seeded PRNG, so every run and every machine gets the same set.

pub mod drive;
pub mod recall;

use std::collections::HashSet;

use duduclaw_session::internals::text::terms::normalize;

/// SplitMix64: tiny, seedable, good enough to pick words.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

const TOOLS: &[&str] = &[
    "pnpm",
    "yarn",
    "npm",
    "cargo",
    "poetry",
    "uv",
    "pip-tools",
    "bundler",
    "gradle",
    "maven",
    "bazel",
    "make",
    "just",
    "nix",
    "docker compose",
    "podman",
    "kubectl",
    "helm",
    "terraform",
    "ansible",
    "pulumi",
    "vite",
    "webpack",
    "esbuild",
    "turborepo",
    "nx",
    "deno",
    "bun",
    "ripgrep",
    "direnv",
];
const TASKS: &[&str] = &[
    "dependency management",
    "local builds",
    "release tagging",
    "database migrations",
    "load testing",
    "code formatting",
    "linting",
    "end-to-end tests",
    "log analysis",
    "feature flags",
    "schema changes",
    "incident response",
    "API documentation",
    "benchmarks",
    "container images",
];
const PROJECTS: &[&str] = &[
    "billing",
    "checkout",
    "search",
    "payments",
    "onboarding",
    "analytics",
    "notifications",
    "auth",
    "inventory",
    "reporting",
    "gateway",
    "scheduler",
    "mobile app",
    "admin console",
    "data pipeline",
];
const ENVS: &[&str] = &[
    "staging",
    "production",
    "the dev cluster",
    "the QA environment",
    "eu-west",
    "us-east",
    "the edge nodes",
];
const DEPLOYS: &[&str] = &[
    "Argo CD",
    "GitHub Actions",
    "GitLab CI",
    "Jenkins",
    "Buildkite",
    "Spinnaker",
    "Fly.io",
    "Render",
    "Heroku",
    "CircleCI",
];
const LANGS: &[&str] = &[
    "Rust",
    "Go",
    "TypeScript",
    "Python",
    "Kotlin",
    "Swift",
    "Elixir",
    "Java",
    "Ruby",
    "C#",
    "Zig",
    "Scala",
];
const TESTS: &[&str] = &[
    "cargo nextest",
    "pytest",
    "Jest",
    "Vitest",
    "Playwright",
    "Cypress",
    "go test",
    "JUnit",
];
const PEOPLE: &[&str] = &[
    "Alice", "Bob", "Chen Wei", "Priya", "Mateo", "Yuki", "Fatima", "Lars", "Amara", "Diego",
];
const COMPONENTS: &[&str] = &[
    "API",
    "frontend",
    "worker queue",
    "CLI",
    "SDK",
    "database layer",
    "cache",
    "cron jobs",
    "webhooks",
];
const DAYS: &[&str] = &["Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays"];
const DBS: &[&str] = &[
    "PostgreSQL",
    "MySQL",
    "SQLite",
    "Redis",
    "MongoDB",
    "ClickHouse",
];
const VERSIONS: &[&str] = &["14", "15", "16", "8.0"];
const VAULTS: &[&str] = &[
    "1Password",
    "HashiCorp Vault",
    "AWS Secrets Manager",
    "Doppler",
    "SOPS files",
];
const ZONES: &[&str] = &[
    "Asia/Taipei",
    "Europe/Berlin",
    "America/New_York",
    "UTC",
    "Asia/Tokyo",
    "America/Sao_Paulo",
    "Europe/London",
    "Australia/Sydney",
];
const TIMES: &[&str] = &["9:00", "9:30", "10:00", "10:30", "14:00", "16:00"];
const SUFFIXES: &[&str] = &[
    "",
    "",
    "",
    " since the last migration",
    " because CI is faster that way",
    " as agreed with the team",
    " until the Q3 rewrite lands",
    " per the platform guidelines",
    " for the mobile release",
    " on the new laptop",
    " after the outage in March",
    " to keep reviews small",
    " when working on hotfixes",
    " in the monorepo",
    " for anything customer-facing",
    " unless asked otherwise",
];

const Z_PROJECTS: &[&str] = &[
    "帳務系統",
    "結帳流程",
    "搜尋服務",
    "金流",
    "會員註冊",
    "數據分析",
    "推播通知",
    "登入驗證",
    "庫存管理",
    "報表平台",
    "排程器",
    "行動應用程式",
    "後台管理介面",
];
const Z_ENVS: &[&str] = &[
    "測試環境",
    "正式環境",
    "開發叢集",
    "東京機房",
    "台北機房",
    "預備環境",
];
const Z_TASKS: &[&str] = &[
    "套件管理",
    "資料庫遷移",
    "版本發佈",
    "壓力測試",
    "程式碼格式化",
    "日誌分析",
    "效能調校",
    "錯誤追蹤",
    "文件撰寫",
];
const Z_PEOPLE: &[&str] = &["王小明", "陳怡君", "林志豪", "張雅婷", "李建宏", "黃淑芬"];
const Z_COMPONENTS: &[&str] = &[
    "後端 API",
    "前端介面",
    "背景工作佇列",
    "命令列工具",
    "資料庫層",
    "快取層",
];
const Z_DAYS: &[&str] = &["週一", "週二", "週三", "週四", "週五"];
const Z_SUFFIXES: &[&str] = &[
    "",
    "",
    "，這是團隊的共識",
    "，上次事故後才改的",
    "，除非另有說明",
    "，新專案也一樣",
    "，第三季重構前都是如此",
    "，以免審查太久",
    "，行動版發佈時特別注意",
    "，客戶看得到的部分尤其如此",
];

fn english(r: &mut Rng) -> String {
    let body = match r.below(10) {
        0 => format!(
            "Uses {} for {} in the {} repo",
            r.pick(TOOLS),
            r.pick(TASKS),
            r.pick(PROJECTS)
        ),
        1 => format!(
            "Prefers {} over {} for {}",
            r.pick(LANGS),
            r.pick(LANGS),
            r.pick(TASKS)
        ),
        2 => format!(
            "The {} service deploys to {} with {}",
            r.pick(PROJECTS),
            r.pick(ENVS),
            r.pick(DEPLOYS)
        ),
        3 => format!(
            "{} owns the {} {} and reviews pull requests on {}",
            r.pick(PEOPLE),
            r.pick(PROJECTS),
            r.pick(COMPONENTS),
            r.pick(DAYS)
        ),
        4 => format!(
            "Never run {} directly on {}; use the {} pipeline instead",
            r.pick(TOOLS),
            r.pick(ENVS),
            r.pick(DEPLOYS)
        ),
        5 => format!(
            "The {} of {} is written in {} and tested with {}",
            r.pick(COMPONENTS),
            r.pick(PROJECTS),
            r.pick(LANGS),
            r.pick(TESTS)
        ),
        6 => format!(
            "Keeps secrets for {} in {}, never in .env files",
            r.pick(PROJECTS),
            r.pick(VAULTS)
        ),
        7 => format!(
            "Wants short bullet points when discussing {} for {}",
            r.pick(TASKS),
            r.pick(PROJECTS)
        ),
        8 => format!(
            "Timezone is {}; the {} team has standup at {}",
            r.pick(ZONES),
            r.pick(PROJECTS),
            r.pick(TIMES)
        ),
        _ => format!(
            "The {} database for {} runs {} {}",
            r.pick(ENVS),
            r.pick(PROJECTS),
            r.pick(DBS),
            r.pick(VERSIONS)
        ),
    };
    body + r.pick(SUFFIXES)
}

fn chinese(r: &mut Rng) -> String {
    let body = match r.below(6) {
        0 => format!("使用者偏好用 {} 來做{}", r.pick(TOOLS), r.pick(Z_TASKS)),
        1 => format!(
            "{}部署在{}，使用 {}",
            r.pick(Z_PROJECTS),
            r.pick(Z_ENVS),
            r.pick(DEPLOYS)
        ),
        2 => format!(
            "{}負責{}的{}，每{}審查程式碼",
            r.pick(Z_PEOPLE),
            r.pick(Z_PROJECTS),
            r.pick(Z_COMPONENTS),
            r.pick(Z_DAYS)
        ),
        3 => format!("回覆請用繁體中文，{}相關的說明請條列", r.pick(Z_TASKS)),
        4 => format!(
            "{}的{}是用 {} 寫的，測試用 {}",
            r.pick(Z_PROJECTS),
            r.pick(Z_COMPONENTS),
            r.pick(LANGS),
            r.pick(TESTS)
        ),
        _ => format!(
            "不要在{}直接執行 {}，要走 {} 流程",
            r.pick(Z_ENVS),
            r.pick(TOOLS),
            r.pick(DEPLOYS)
        ),
    };
    body + r.pick(Z_SUFFIXES)
}

/// One fact: about four in five in English, the rest in Traditional Chinese.
pub fn fact(r: &mut Rng) -> String {
    if r.below(5) == 0 {
        chinese(r)
    } else {
        english(r)
    }
}

/// `n` facts, all distinct after normalization (so none is dropped as a duplicate).
pub fn facts(n: usize, seed: u64) -> Vec<String> {
    let mut r = Rng::new(seed);
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let f = fact(&mut r);
        if seen.insert(normalize(&f)) {
            out.push(f);
        }
    }
    out
}

/// Keywords for one fact, as many as the facts side call writes (about 17,
/// a few of them short questions): words and phrases taken from other
/// generated facts, so they share the queries' vocabulary as real keywords
/// do and load the keyword column of the index as real ones would.
pub fn keywords(r: &mut Rng, pool: &[String]) -> Vec<String> {
    (0..17)
        .map(|i| {
            let from = &pool[r.below(pool.len())];
            let words: Vec<&str> = from.split_whitespace().collect();
            if words.len() > 1 {
                let n = if i % 6 == 5 { 4 } else { 1 + r.below(2) };
                let start = r.below(words.len().saturating_sub(n) + 1);
                words[start..(start + n).min(words.len())].join(" ")
            } else {
                // Chinese: no spaces; a two- to four-character stretch.
                let chars: Vec<char> = from.chars().collect();
                let n = 2 + r.below(3);
                let start = r.below(chars.len().saturating_sub(n) + 1);
                chars[start..(start + n).min(chars.len())].iter().collect()
            }
        })
        .collect()
}

/// The facts as JSON Lines, the format `facts import` reads.
pub fn jsonl(facts: &[String]) -> String {
    let mut out = String::with_capacity(facts.len() * 80);
    for f in facts {
        out.push_str(&serde_json::json!({ "content": f }).to_string());
        out.push('\n');
    }
    out
}

/// A user message in English about the same world as the facts.
pub const QUERY_EN: &str =
    "How should I deploy the billing service to staging with Argo CD, and which tests must pass?";
/// The same kind of message in Traditional Chinese.
pub const QUERY_ZH: &str = "帳務系統要怎麼部署到測試環境？資料庫遷移要注意什麼？";

/// Turn messages for end-to-end sessions: varied topics, so different facts match.
pub const MESSAGES: &[&str] = &[
    "Which test runner do we use for the checkout API, and how do I run it locally?",
    "Set up the database migration for the billing worker queue on staging.",
    "帳務系統的資料庫遷移要怎麼在測試環境執行？",
    "Who reviews pull requests for the search frontend, and on which day?",
    "Write the GitHub Actions job that deploys the payments service to production.",
    "Where do we keep the secrets for the notifications webhooks?",
    "推播通知的背景工作佇列是用什麼語言寫的？",
    "Draft a load testing plan for the gateway cache before the release.",
    "What is the standup time of the analytics team, and in which timezone?",
    "Fix the linting errors in the inventory CLI and format the code.",
];
