//! What another account on the machine can and cannot do to ours: the
//! warm host's folder made first by someone else, opened up, or a link in
//! its place gets no byte of a turn (which runs cold and says so); a host
//! serves only its own user; a host reads bounded requests, and no
//! connection keeps it alive past its lifetime. The second account is
//! nobody, acted as by a thread of the test ([`common::as_nobody`]).

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;
use standin::{Recorded, Reply, StandIn};

use crate::common::{self, Env, NOBODY, assert_ok, stderr, wait_until};

fn echo(r: &Recorded) -> Reply {
    Reply::Text(format!("reply to: {}", r.last_user_text()))
}

fn socket_name() -> String {
    format!("host-{}.sock", env!("CARGO_PKG_VERSION"))
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A listener on our host's socket name in a folder someone made first:
/// every connection and byte that reaches it is counted.
struct Squatter {
    stop: Arc<AtomicBool>,
    connections: Arc<AtomicUsize>,
    bytes: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Squatter {
    /// Make `folder` open to all (mode 0777; kept as it is when it exists),
    /// a link to it at `link` if given, and listen on our socket's name in
    /// it: as nobody when `theirs`, else as this test's own account.
    fn start(folder: PathBuf, link: Option<PathBuf>, theirs: bool) -> Squatter {
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicUsize::new(0));
        let bytes = Arc::new(AtomicUsize::new(0));
        let ready = Arc::new(AtomicBool::new(false));
        let work = {
            let (stop, connections, bytes, ready) = (
                Arc::clone(&stop),
                Arc::clone(&connections),
                Arc::clone(&bytes),
                Arc::clone(&ready),
            );
            move || {
                if !folder.exists() {
                    std::fs::create_dir(&folder).unwrap();
                    chmod(&folder, 0o777);
                }
                if let Some(link) = &link {
                    std::os::unix::fs::symlink(&folder, link).unwrap();
                }
                let path = folder.join(socket_name());
                let listener = UnixListener::bind(&path).unwrap();
                chmod(&path, 0o777);
                listener.set_nonblocking(true).unwrap();
                ready.store(true, Ordering::SeqCst);
                let mut open: Vec<UnixStream> = Vec::new();
                let mut buf = [0u8; 65536];
                while !stop.load(Ordering::SeqCst) {
                    if let Ok((conn, _)) = listener.accept() {
                        conn.set_nonblocking(true).unwrap();
                        connections.fetch_add(1, Ordering::SeqCst);
                        open.push(conn);
                    }
                    for conn in &mut open {
                        if let Ok(n) = conn.read(&mut buf) {
                            bytes.fetch_add(n, Ordering::SeqCst);
                        }
                    }
                    // A listener's pace, not a wait: how often it looks
                    // for connections and bytes.
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        };
        let thread = if theirs {
            common::as_nobody(work)
        } else {
            std::thread::spawn(work)
        };
        wait_until("the squatter to listen", Duration::from_secs(10), || {
            ready.load(Ordering::SeqCst) || thread.is_finished()
        });
        assert!(!thread.is_finished(), "the squatter could not start");
        Squatter {
            stop,
            connections,
            bytes,
            thread: Some(thread),
        }
    }

    /// Connections and bytes received so far.
    fn received(&self) -> (usize, usize) {
        (
            self.connections.load(Ordering::SeqCst),
            self.bytes.load(Ordering::SeqCst),
        )
    }
}

impl Drop for Squatter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How the host's folder was prepared before our first turn.
#[derive(Debug, Clone, Copy)]
enum Trap {
    /// Another account made it first, open to all, and listens in it.
    Theirs,
    /// Ours, but opened to others (0755), a listener of ours in it.
    OursButOpen,
    /// A link in its place, to another account's open folder.
    Link,
}

/// A machine where `XDG_RUNTIME_DIR` is unset (a service, cron, a
/// container, ssh without a login manager): the host's folder is
/// `$TMPDIR/duduclaw-<uid>`, and `$TMPDIR` is shared like `/tmp` (1777).
/// Whatever stands at that name that is not ours alone gets nothing: no
/// connection, no byte (the API key and the message are in a turn's
/// request), no file; the turn answers, cold, and says why on stderr;
/// `doctor` names the folder, its owner or mode.
#[requires(claude, root)]
fn a_folder_another_account_made_first_gets_no_byte_and_the_turn_runs_cold() {
    for trap in [Trap::Theirs, Trap::OursButOpen, Trap::Link] {
        let s = StandIn::start_with(echo);
        let env = Env::real(&s.base_url()).warm();
        let tmp = env.dir.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        chmod(&tmp, 0o1777);
        // nobody may pass through the test's own folder to the shared one.
        chmod(env.dir.path(), 0o711);
        let env = env.env("TMPDIR", tmp.to_str().unwrap());
        let uid = rustix::process::getuid().as_raw();
        let ours = tmp.join(format!("duduclaw-{uid}"));
        let (squatter, squatted) = match trap {
            Trap::Theirs => (Squatter::start(ours.clone(), None, true), ours.clone()),
            Trap::OursButOpen => {
                std::fs::create_dir(&ours).unwrap();
                chmod(&ours, 0o755);
                (Squatter::start(ours.clone(), None, false), ours.clone())
            }
            Trap::Link => {
                let elsewhere = tmp.join("elsewhere");
                let squatter = Squatter::start(elsewhere.clone(), Some(ours.clone()), true);
                (squatter, elsewhere)
            }
        };
        let out = env.turn("a", "c", &["--json", "--no-extract"], "the secret plan");
        assert_ok(&out);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["reply"], "reply to: the secret plan", "{trap:?}");
        assert_eq!(v["warm"], "cold", "{trap:?}: {v}");
        let said = stderr(&out);
        assert!(
            said.contains(&ours.display().to_string()) && said.contains("no warm claude"),
            "{trap:?}: one line says why the turn ran cold: {said}"
        );
        assert_eq!(said.lines().count(), 1, "{trap:?}: {said}");
        assert_eq!(
            squatter.received(),
            (0, 0),
            "{trap:?}: no connection, no byte"
        );
        let mut names: Vec<String> = std::fs::read_dir(&squatted)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, [socket_name()], "{trap:?}: no file of ours in it");
        // Never repaired either: neither chmod nor chown nor removal.
        match trap {
            Trap::Theirs => assert_eq!(mode(&ours), 0o777),
            Trap::OursButOpen => assert_eq!(mode(&ours), 0o755),
            Trap::Link => assert!(std::fs::symlink_metadata(&ours).unwrap().is_symlink()),
        }

        let doctor = env.cmd().args(["doctor", "--json"]).output().unwrap();
        let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
        common::conforms("doctor", &report);
        let warnings = report["warnings"].to_string();
        let named = ours.display().to_string();
        let why = match trap {
            Trap::Theirs => format!("uid {NOBODY}"),
            Trap::OursButOpen => "mode 0755".to_string(),
            Trap::Link => "symbolic link".to_string(),
        };
        assert!(
            warnings.contains(&named) && warnings.contains(&why),
            "{trap:?}: doctor names the folder and why: {warnings}"
        );
        env.end_processes();
    }
}

/// The warm host is the user's alone: its socket lies in a folder only they
/// may enter (0700; the socket 0600). Another account's command refuses
/// that folder before it connects; and where the folder is opened up
/// anyway, the host checks the peer's uid and serves no one else.
#[requires(claude, root)]
fn the_host_serves_no_other_account() {
    let s = StandIn::start_with(echo);
    let env = Env::real(&s.base_url()).warm();
    // A runtime folder both users name: the host's own folder lies inside.
    let run = env.dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    chmod(&run, 0o755);
    let env = env.env("XDG_RUNTIME_DIR", run.to_str().unwrap());
    env.turn_json("a", "c", &["--no-extract"], "hello");
    let dir = run.join("duduclaw-session");
    let socket = dir.join(socket_name());
    assert_eq!((mode(&dir), mode(&socket)), (0o700, 0o600));
    let mine = env.cmd().args(["host", "--status"]).output().unwrap();
    assert_ok(&mine);
    assert!(String::from_utf8_lossy(&mine.stdout).contains("\"turns\":1"));
    // Their command: the folder is not theirs, so nothing is asked.
    let status = |env: &Env| env.as_unprivileged(&["host".into(), "--status".into()]);
    let theirs = status(&env);
    assert_eq!(theirs.status.code(), Some(13), "{}", stderr(&theirs));

    // Opened up by mistake: the host still serves only its own user.
    chmod(env.dir.path(), 0o755);
    chmod(&dir, 0o711);
    chmod(&socket, 0o666);
    let asked = socket.clone();
    let answer = common::as_nobody(move || {
        let mut conn = UnixStream::connect(&asked).expect("nobody may connect now");
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let _ = conn.write_all(b"{\"type\":\"status\"}\n");
        let mut got = Vec::new();
        let _ = conn.read_to_end(&mut got);
        got
    })
    .join()
    .unwrap();
    assert!(
        answer.is_empty(),
        "the host answered another account: {answer:?}"
    );
    let log = std::fs::read_to_string(dir.join("host.log")).unwrap();
    assert!(
        log.contains(&format!("refused a connection from uid Some({NOBODY})")),
        "{log}"
    );
    env.end_processes();
}

/// A process's resident memory, in bytes.
fn resident(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb * 1024
}

/// The host reads bounded input: 64 MiB without a newline costs it at
/// most the bound on a request's line (its memory grows by a few MB at
/// most) and the connection is dropped; a connection that says nothing is
/// closed after the request wait. Meanwhile it serves its turns, and it
/// exits once idle as before: no connection keeps it alive.
#[requires(claude)]
fn the_host_reads_bounded_requests_and_no_silent_connection_keeps_it() {
    let s = StandIn::start_with(echo);
    let env = Env::real(&s.base_url()).warm();
    let turn = |ttl: &str, text: &str| {
        env.turn_json("a", "c", &["--no-extract", "--cache-ttl", ttl], text)["warm"].clone()
    };
    assert_eq!(turn("60s", "first"), "started");
    let hosts = env.processes_running("\0host\0");
    assert_eq!(hosts.len(), 1, "one host");
    let host = hosts[0];
    let uid = rustix::process::getuid().as_raw();
    let socket = env
        .dir
        .path()
        .join(format!("duduclaw-{uid}"))
        .join(socket_name());
    let before = resident(host);

    let silent = UnixStream::connect(&socket).unwrap();
    let mut flood = UnixStream::connect(&socket).unwrap();
    flood
        .set_write_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let chunk = vec![b'x'; 1024 * 1024];
    let mut sent = 0;
    for _ in 0..64 {
        // The host stops reading at its bound and closes: the rest fails.
        match flood.write_all(&chunk) {
            Ok(()) => sent += chunk.len(),
            Err(_) => break,
        }
    }
    assert!(sent < 64 * chunk.len(), "the host read all 64 MiB");
    let grown = resident(host).saturating_sub(before);
    assert!(
        grown < 8 * 1024 * 1024,
        "the host grew by {grown} bytes on a request without end"
    );
    // Still serving: the session's claude answers its next turn.
    assert_eq!(turn("60s", "second"), "kept");

    // A silent connection is closed by the host, not kept.
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(
        (&silent).read(&mut byte).unwrap(),
        0,
        "the host closed the silent connection"
    );

    // Idle past a short lifetime, with a silent connection open: the host
    // ends its claude and exits all the same.
    assert_eq!(turn("1s", "last"), "kept");
    let _quiet = UnixStream::connect(&socket).unwrap();
    wait_until("the host to exit", Duration::from_secs(30), || {
        !env.processes().contains(&host)
    });
    env.end_processes();
}
