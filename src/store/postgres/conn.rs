//! A synchronous face on one `tokio_postgres` connection, callable from
//! any thread, inside a tokio runtime or not.
//!
//! The connection's I/O runs on a thread of its own (one per connection,
//! for its whole life) in a small current-thread runtime. The client half
//! only talks to it through channels, so a call here just polls the
//! client's future on the caller's thread with a minimal executor
//! (`pollster`): no runtime is entered there, which is what lets the same
//! call run from async code, where tokio forbids starting or blocking on a
//! runtime, and parameters may borrow from the caller's stack.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio_postgres::config::SslMode;
use tokio_postgres::error::SqlState;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::types::{FromSqlOwned, ToSql};
use tokio_postgres::{
    AsyncMessage, Client, Config, Error, GenericClient, NoTls, Row, Socket, Transaction,
};

use super::ServerUrl;
use crate::store::StoreError;

/// How long to wait before asking a full or starting server again.
const RETRY_EVERY: Duration = Duration::from_millis(200);

/// The queries a connection and a transaction both run.
pub trait Queries {
    /// The async client the calls go through.
    type Async: GenericClient + Sync;

    fn client(&self) -> &Self::Async;

    fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, Error> {
        pollster::block_on(self.client().execute(sql, params))
    }

    fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, Error> {
        pollster::block_on(self.client().query(sql, params))
    }

    fn query_one(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row, Error> {
        pollster::block_on(self.client().query_one(sql, params))
    }

    fn query_opt(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Option<Row>, Error> {
        pollster::block_on(self.client().query_opt(sql, params))
    }

    fn batch_execute(&self, sql: &str) -> Result<(), Error> {
        pollster::block_on(self.client().batch_execute(sql))
    }

    /// The first column of the one row `sql` returns.
    fn value<T: FromSqlOwned>(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<T, Error> {
        self.query_one(sql, params)?.try_get(0)
    }

    /// The first column of the row `sql` returns, if it returns one.
    fn value_opt<T: FromSqlOwned>(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<T>, Error> {
        self.query_opt(sql, params)?
            .map(|r| r.try_get(0))
            .transpose()
    }
}

/// One open connection. Dropping it closes the connection and waits for
/// its thread, so the goodbye has been sent by the time the drop returns;
/// the server then ends the backend, and its advisory locks with it.
pub(super) struct Conn {
    // Declared before the driver, so it is dropped first: the connection
    // ends once its last client is gone, and only then can the join end.
    client: Client,
    _driver: Driver,
}

impl Queries for Conn {
    type Async = Client;

    fn client(&self) -> &Client {
        &self.client
    }
}

impl Conn {
    pub(super) fn transaction(&mut self) -> Result<Tx<'_>, Error> {
        pollster::block_on(self.client.transaction()).map(Tx)
    }
}

/// A transaction: rolled back when dropped without `commit` (the ROLLBACK
/// is queued, not waited for; the connection sends it before anything
/// asked after it).
pub(super) struct Tx<'a>(Transaction<'a>);

impl<'a> Queries for Tx<'a> {
    type Async = Transaction<'a>;

    fn client(&self) -> &Transaction<'a> {
        &self.0
    }
}

impl Tx<'_> {
    pub(super) fn commit(self) -> Result<(), Error> {
        pollster::block_on(self.0.commit())
    }
}

/// The connection's thread, joined when the connection is dropped.
struct Driver(Option<JoinHandle<()>>);

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(thread) = self.0.take() {
            // It panicked only if the driver did; nothing is left to undo.
            let _ = thread.join();
        }
    }
}

/// Open a connection, waiting up to `wait` while the server is full or
/// starting. Errors name the store (never its password).
pub(super) fn connect(url: &ServerUrl, wait: Duration) -> anyhow::Result<Conn> {
    open(url, wait, None)
}

/// A connection that listens on `channel` (an SQL identifier), with what
/// says a notification arrived: a slot of one, so wakes that pile up while
/// nobody waits count once and hold no memory. The LISTEN has taken effect
/// when this returns: every transaction that notifies and commits after
/// that is seen.
pub(super) fn listen(
    url: &ServerUrl,
    wait: Duration,
    channel: &str,
) -> anyhow::Result<(Conn, mpsc::Receiver<()>)> {
    let (wake, woken) = mpsc::sync_channel(1);
    let conn = open(url, wait, Some(wake))?;
    conn.batch_execute(&format!("LISTEN {channel}"))
        .map_err(StoreError::from)?;
    Ok((conn, woken))
}

fn open(
    url: &ServerUrl,
    wait: Duration,
    wake: Option<mpsc::SyncSender<()>>,
) -> anyhow::Result<Conn> {
    let (config, tls) = url.config()?;
    // No TLS setup at all when the URL says sslmode=disable.
    let tls = match config.get_ssl_mode() {
        SslMode::Disable => None,
        _ => Some(tls.connector()?),
    };
    let (tell, told) = mpsc::sync_channel(1);
    let url = url.clone();
    let driver = std::thread::Builder::new()
        .name("duduclaw-pg".into())
        .spawn(move || match tls {
            Some(tls) => drive(&config, tls, &url, wait, &tell, wake.as_ref()),
            None => drive(&config, NoTls, &url, wait, &tell, wake.as_ref()),
        })
        .context("could not start the session store's connection thread")?;
    let driver = Driver(Some(driver));
    match told.recv() {
        Ok(Ok(client)) => Ok(Conn {
            client,
            _driver: driver,
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(anyhow::anyhow!(
            "the session store's connection thread ended before connecting"
        )),
    }
}

/// The connection thread: connect (retrying while the server is full or
/// starting), hand the client over, then serve it until it is dropped or
/// the connection breaks, passing on notifications to `wake`.
fn drive<T: MakeTlsConnect<Socket> + Clone>(
    config: &Config,
    tls: T,
    url: &ServerUrl,
    wait: Duration,
    tell: &mpsc::SyncSender<anyhow::Result<Client>>,
    wake: Option<&mpsc::SyncSender<()>>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = tell.send(Err(anyhow::Error::new(e)
                .context("could not start the session store's connection runtime")));
            return;
        }
    };
    let start = Instant::now();
    let mut said_waiting = false;
    let mut connection = loop {
        match rt.block_on(config.connect(tls.clone())) {
            Ok((client, connection)) => {
                if tell.send(Ok(client)).is_err() {
                    return;
                }
                break connection;
            }
            Err(e) => {
                let busy = e.code().is_some_and(|c| {
                    *c == SqlState::TOO_MANY_CONNECTIONS || *c == SqlState::CANNOT_CONNECT_NOW
                });
                if busy && start.elapsed() < wait {
                    if !said_waiting {
                        // Once: `-v` shows why a turn is slow to start.
                        tracing::info!(
                            "the session store is full or starting: waiting up to {}s for a connection",
                            wait.as_secs()
                        );
                        said_waiting = true;
                    }
                    std::thread::sleep(RETRY_EVERY);
                    continue;
                }
                let why = if busy {
                    format!(" (still full after waiting {}s)", wait.as_secs())
                } else {
                    String::new()
                };
                let _ = tell.send(Err(anyhow::Error::new(e)
                    .context(format!("could not connect to session store {url}{why}"))));
                return;
            }
        }
    };
    // What awaiting the connection does, except that notifications, which
    // it would drop, are passed on. A message is handled as it comes, with
    // no polling loop: an idle connection costs nothing.
    let served = rt.block_on(async {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                None => return Ok(()),
                Some(Err(e)) => return Err(e),
                Some(Ok(AsyncMessage::Notification(_))) => {
                    // Full: a wake is pending already. Gone: the listener
                    // is being dropped.
                    if let Some(wake) = wake {
                        let _ = wake.try_send(());
                    }
                }
                Some(Ok(AsyncMessage::Notice(notice))) => {
                    tracing::debug!("session store: {}: {}", notice.severity(), notice.message());
                }
                Some(Ok(_)) => {}
            }
        }
    });
    // A broken connection shows in the client's next call as well (and a
    // listener's receiver sees its sender gone); this is only the first
    // word of it.
    if let Err(e) = served {
        tracing::debug!("session store connection ended: {e}");
    }
}
