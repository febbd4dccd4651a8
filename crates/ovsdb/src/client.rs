//! The blocking client: one connection, read on the caller's thread.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value as Json};

use crate::error::{Error, Result};
use crate::ops::{parse_transact_result, transact_params, OpResult, Operation};
use crate::replica::{Replica, RowChange};
use crate::rpc::{error_text, Framer, Message};
use crate::schema::DatabaseSchema;

/// Where the server listens: `unix:PATH`, `tcp:IP:PORT` or `ssl:IP:PORT`
/// (an IPv6 address in brackets, `tcp:[::1]:6640`), as `ovsdb-server
/// --remote`'s active counterparts `punix:`, `ptcp:` and `pssl:` are
/// named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// A Unix stream socket.
    Unix(PathBuf),
    /// A TCP socket.
    Tcp(SocketAddr),
    /// TLS over TCP (the client's TLS settings: [`Client::connect_with`]).
    Ssl(SocketAddr),
}

impl FromStr for Address {
    type Err = Error;

    fn from_str(s: &str) -> Result<Address> {
        let bad = |reason: &str| Error::BadAddress {
            address: s.to_string(),
            reason: reason.to_string(),
        };
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(bad("no path"));
            }
            Ok(Address::Unix(PathBuf::from(path)))
        } else if let Some(rest) = s.strip_prefix("tcp:") {
            rest.parse()
                .map(Address::Tcp)
                .map_err(|_| bad("expected tcp:IP:PORT"))
        } else if let Some(rest) = s.strip_prefix("ssl:") {
            rest.parse()
                .map(Address::Ssl)
                .map_err(|_| bad("expected ssl:IP:PORT"))
        } else {
            Err(bad("expected unix:PATH, tcp:IP:PORT or ssl:IP:PORT"))
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
            Address::Tcp(a) => write!(f, "tcp:{a}"),
            Address::Ssl(a) => write!(f, "ssl:{a}"),
        }
    }
}

/// TLS settings for `ssl:` addresses (certificate, key, trusted CAs).
pub type TlsConfig = Arc<rustls::ClientConfig>;

type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
    Tls(Box<TlsStream>),
}

impl Stream {
    fn connect(
        address: &Address,
        timeout: Duration,
        tls: Option<&TlsConfig>,
    ) -> io::Result<Stream> {
        let tcp = |a: &SocketAddr| -> io::Result<TcpStream> {
            let t = TcpStream::connect_timeout(a, timeout)?;
            t.set_nodelay(true)?;
            t.set_write_timeout(Some(timeout))?;
            Ok(t)
        };
        Ok(match address {
            Address::Unix(p) => {
                let u = UnixStream::connect(p)?;
                u.set_write_timeout(Some(timeout))?;
                Stream::Unix(u)
            }
            Address::Tcp(a) => Stream::Tcp(tcp(a)?),
            Address::Ssl(a) => {
                let cfg = tls.ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "ssl: needs a private key, a certificate and a CA certificate",
                    )
                })?;
                let mut sock = tcp(a)?;
                sock.set_read_timeout(Some(timeout))?;
                let name = rustls::pki_types::ServerName::IpAddress(a.ip().into());
                let mut conn = rustls::ClientConnection::new(cfg.clone(), name)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                // The handshake now, so that a refused certificate is the
                // connection's error.
                while conn.is_handshaking() {
                    conn.complete_io(&mut sock)?;
                }
                Stream::Tls(Box::new(rustls::StreamOwned::new(conn, sock)))
            }
        })
    }

    fn set_read_timeout(&self, t: Duration) -> io::Result<()> {
        match self {
            Stream::Unix(u) => u.set_read_timeout(Some(t)),
            Stream::Tcp(s) => s.set_read_timeout(Some(t)),
            Stream::Tls(s) => s.sock.set_read_timeout(Some(t)),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(u) => u.read(buf),
            Stream::Tcp(t) => t.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(u) => u.write(buf),
            Stream::Tcp(t) => t.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(u) => u.flush(),
            Stream::Tcp(t) => t.flush(),
            Stream::Tls(t) => t.flush(),
        }
    }
}

struct Conn {
    stream: Stream,
    framer: Framer,
    buf: Vec<u8>,
}

/// One table to monitor, with all its columns or some.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableMonitor {
    /// The table.
    pub table: String,
    /// The columns; `None` is all of them.
    pub columns: Option<Vec<String>>,
}

impl TableMonitor {
    /// All the table's columns.
    pub fn all(table: &str) -> TableMonitor {
        TableMonitor {
            table: table.to_string(),
            columns: None,
        }
    }

    /// Some of the table's columns.
    pub fn columns(table: &str, columns: &[&str]) -> TableMonitor {
        TableMonitor {
            table: table.to_string(),
            columns: Some(columns.iter().map(|c| c.to_string()).collect()),
        }
    }
}

struct MonitorState {
    db: String,
    tables: Vec<TableMonitor>,
    id: Json,
}

fn is_disconnect(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof
            | io::ErrorKind::NotConnected
    )
}

fn deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(86400 * 365))
}

/// A blocking OVSDB client. See the crate documentation for the model.
pub struct Client {
    address: Address,
    /// TLS settings for `ssl:`.
    tls: Option<TlsConfig>,
    conn: Option<Conn>,
    timeout: Duration,
    next_id: u64,
    schemas: BTreeMap<String, Arc<DatabaseSchema>>,
    monitor: Option<MonitorState>,
    replica: Replica,
    pending: VecDeque<Vec<RowChange>>,
    echoes_answered: u64,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("address", &self.address.to_string())
            .field("connected", &self.conn.is_some())
            .finish_non_exhaustive()
    }
}

/// How long a request waits for its reply unless
/// [`Client::set_timeout`] says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

impl Client {
    /// Connects to `unix:PATH` or `tcp:IP:PORT`.
    pub fn connect(address: &str) -> Result<Client> {
        Client::connect_with(address, None)
    }

    /// Connects to `unix:PATH`, `tcp:IP:PORT` or, with `tls`,
    /// `ssl:IP:PORT` (the server's certificate must be signed by a CA of
    /// `tls`; reconnections use the same settings).
    pub fn connect_with(address: &str, tls: Option<TlsConfig>) -> Result<Client> {
        let text = address;
        let address: Address = address.parse()?;
        if matches!(address, Address::Ssl(_)) && tls.is_none() {
            return Err(Error::BadAddress {
                address: text.to_string(),
                reason:
                    "ssl: needs TLS settings (a private key, a certificate and a CA certificate)"
                        .to_string(),
            });
        }
        let mut c = Client {
            tls,
            address,
            conn: None,
            timeout: DEFAULT_TIMEOUT,
            next_id: 1,
            schemas: BTreeMap::new(),
            monitor: None,
            replica: Replica::new(None),
            pending: VecDeque::new(),
            echoes_answered: 0,
        };
        c.open()?;
        Ok(c)
    }

    fn open(&mut self) -> Result<()> {
        self.conn = None;
        let stream =
            Stream::connect(&self.address, self.timeout, self.tls.as_ref()).map_err(|source| {
                Error::Io {
                    context: format!("connecting to {}", self.address),
                    source,
                }
            })?;
        self.conn = Some(Conn {
            stream,
            framer: Framer::new(),
            buf: vec![0; 64 << 10],
        });
        Ok(())
    }

    /// The server's address.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// How long each request waits for its reply (and a write may block).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Whether the connection is up (as far as the client has seen: a
    /// server that went away is noticed at the next read or write).
    pub fn is_connected(&self) -> bool {
        self.conn.is_some()
    }

    /// How many `echo` requests from the server were answered.
    pub fn echoes_answered(&self) -> u64 {
        self.echoes_answered
    }

    /// Closes the connection (the replica is kept until
    /// [`reconnect`](Self::reconnect)).
    pub fn disconnect(&mut self) {
        self.conn = None;
    }

    /// Connects again and, if a [`monitor`](Self::monitor) was set up,
    /// monitors the same tables from scratch: the replica is rebuilt from
    /// the server's current contents, and updates not yet taken are
    /// dropped. On failure the client stays disconnected; call again
    /// (with back-off) to retry.
    pub fn reconnect(&mut self) -> Result<Vec<RowChange>> {
        self.pending.clear();
        self.schemas.clear();
        self.open()?;
        let result = match self.monitor.take() {
            Some(m) => self.monitor(&m.db, &m.tables).inspect_err(|_| {
                // Keep what to monitor for the next try.
                self.monitor = Some(m);
            }),
            None => Ok(Vec::new()),
        };
        if result.is_err() {
            self.conn = None;
        }
        result
    }

    fn send(&mut self, msg: &Message, method: &str) -> Result<()> {
        let address = self.address.to_string();
        let conn = self.conn.as_mut().ok_or_else(|| Error::NotConnected {
            address: address.clone(),
        })?;
        if let Err(source) = conn.stream.write_all(&msg.to_bytes()) {
            self.conn = None;
            return Err(if is_disconnect(&source) {
                Error::Disconnected {
                    address,
                    waiting_for: Some(method.to_string()),
                }
            } else {
                Error::Io {
                    context: format!("sending {method} to {address}"),
                    source,
                }
            });
        }
        Ok(())
    }

    /// The next message, `None` at the deadline.
    fn read_message(
        &mut self,
        until: Instant,
        waiting_for: Option<&str>,
    ) -> Result<Option<Message>> {
        let address = self.address.to_string();
        loop {
            let conn = self.conn.as_mut().ok_or_else(|| Error::NotConnected {
                address: address.clone(),
            })?;
            match conn.framer.next_message() {
                Ok(Some(m)) => return Ok(Some(m)),
                Ok(None) => {}
                Err(e) => {
                    self.conn = None;
                    return Err(e);
                }
            }
            let now = Instant::now();
            if now >= until {
                return Ok(None);
            }
            let wait = (until - now).max(Duration::from_millis(1));
            let res = conn
                .stream
                .set_read_timeout(wait)
                .and_then(|()| conn.stream.read(&mut conn.buf));
            match res {
                Ok(0) => {
                    self.conn = None;
                    return Err(Error::Disconnected {
                        address,
                        waiting_for: waiting_for.map(String::from),
                    });
                }
                Ok(n) => {
                    let Conn { framer, buf, .. } = conn;
                    framer.push(&buf[..n]);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(source) => {
                    self.conn = None;
                    return Err(if is_disconnect(&source) {
                        Error::Disconnected {
                            address,
                            waiting_for: waiting_for.map(String::from),
                        }
                    } else {
                        Error::Io {
                            context: format!("reading from {address}"),
                            source,
                        }
                    });
                }
            }
        }
    }

    /// Handles what the server sends unasked (echo requests, updates);
    /// gives back replies.
    fn handle(&mut self, msg: Message) -> Result<Option<Message>> {
        match msg {
            Message::Request { method, params, id } => {
                let reply = if method == "echo" {
                    self.echoes_answered += 1;
                    Message::Response { result: params, id }
                } else {
                    Message::Error {
                        error: json!({"error": "unknown method", "details": method}),
                        id,
                    }
                };
                self.send(&reply, "echo reply")?;
                Ok(None)
            }
            Message::Notification { method, params } => {
                if method == "update" {
                    let (Some(id), Some(updates)) = (params.get(0), params.get(1)) else {
                        self.conn = None;
                        return Err(Error::Protocol(format!(
                            "update notification without monitor id and updates: {}",
                            crate::error::abbreviate(&params)
                        )));
                    };
                    if self.monitor.as_ref().is_some_and(|m| &m.id == id) {
                        match self.replica.apply_table_updates(updates) {
                            Ok(changes) => self.pending.push_back(changes),
                            Err(e) => {
                                // The replica can no longer be trusted:
                                // reconnecting rebuilds it.
                                self.conn = None;
                                return Err(e);
                            }
                        }
                    }
                }
                Ok(None)
            }
            reply => Ok(Some(reply)),
        }
    }

    /// Sends any request and waits for its result: the building block of
    /// the other methods. Updates and echo requests that arrive meanwhile
    /// are handled.
    pub fn call(&mut self, method: &str, params: Json) -> Result<Json> {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(
            &Message::Request {
                method: method.to_string(),
                params,
                id: id.clone(),
            },
            method,
        )?;
        let until = deadline(self.timeout);
        loop {
            let Some(msg) = self.read_message(until, Some(method))? else {
                return Err(Error::Timeout {
                    method: method.to_string(),
                    address: self.address.to_string(),
                    timeout_ms: self.timeout.as_millis(),
                });
            };
            match self.handle(msg)? {
                Some(Message::Response { result, id: rid }) if rid == id => return Ok(result),
                Some(Message::Error { error, id: rid }) if rid == id => {
                    let (error, details) = error_text(&error);
                    return Err(Error::Server {
                        method: method.to_string(),
                        error,
                        details,
                    });
                }
                // A late reply to a request that timed out.
                _ => {}
            }
        }
    }

    /// Sends `echo` and checks the reply.
    pub fn echo(&mut self) -> Result<()> {
        let params = json!(["flowpath"]);
        let result = self.call("echo", params.clone())?;
        if result == params {
            Ok(())
        } else {
            Err(Error::Protocol(format!("echo answered with {result}")))
        }
    }

    /// The server's databases.
    pub fn list_dbs(&mut self) -> Result<Vec<String>> {
        let result = self.call("list_dbs", json!([]))?;
        result
            .as_array()
            .and_then(|a| a.iter().map(|s| s.as_str().map(String::from)).collect())
            .ok_or_else(|| Error::Protocol(format!("list_dbs answered with {result}")))
    }

    /// A database's schema (fetched once per connection, then cached).
    pub fn get_schema(&mut self, db: &str) -> Result<Arc<DatabaseSchema>> {
        if let Some(s) = self.schemas.get(db) {
            return Ok(s.clone());
        }
        let result = self.call("get_schema", json!([db]))?;
        let schema = Arc::new(DatabaseSchema::from_json(&result)?);
        self.schemas.insert(db.to_string(), schema.clone());
        Ok(schema)
    }

    /// The monitored database's schema, once [`monitor`](Self::monitor)
    /// succeeded.
    pub fn schema(&self) -> Option<&DatabaseSchema> {
        self.replica.schema()
    }

    /// Starts monitoring `tables` of `db` (replacing an earlier monitor):
    /// fetches the schema, checks the tables and columns against it, and
    /// fills a new replica with the server's current rows, which it also
    /// returns as insertions. Later changes arrive as `update`
    /// notifications: see [`next_update`](Self::next_update).
    pub fn monitor(&mut self, db: &str, tables: &[TableMonitor]) -> Result<Vec<RowChange>> {
        let schema = self.get_schema(db)?;
        let mut requests = Map::new();
        for t in tables {
            let ts = schema.table(&t.table)?;
            let mut req = Map::new();
            if let Some(cols) = &t.columns {
                for c in cols {
                    if !ts.columns.contains_key(c) {
                        return Err(Error::NoSuchColumn {
                            table: t.table.clone(),
                            column: c.clone(),
                        });
                    }
                }
                req.insert("columns".into(), json!(cols));
            }
            requests.insert(t.table.clone(), Json::Object(req));
        }
        if let Some(old) = self.monitor.take() {
            // Best effort: a server that refuses only keeps sending
            // updates with the old id, which are ignored.
            let _ = self.call("monitor_cancel", json!([old.id]));
        }
        let id = json!(format!("flowpath-{}", self.next_id));
        self.monitor = Some(MonitorState {
            db: db.to_string(),
            tables: tables.to_vec(),
            id: id.clone(),
        });
        self.pending.clear();
        self.replica = Replica::new(Some(schema));
        let result = self
            .call("monitor", json!([db, id, requests]))
            .inspect_err(|_| self.monitor = None)?;
        self.replica.apply_table_updates(&result).inspect_err(|_| {
            self.monitor = None;
        })
    }

    /// The monitored tables as last updated.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// Waits up to `timeout` for the next `update` notification, applies
    /// it to the replica and returns its changes; `None` when none came
    /// in time. Updates that arrived during another call come first.
    pub fn next_update(&mut self, timeout: Duration) -> Result<Option<Vec<RowChange>>> {
        if let Some(u) = self.pending.pop_front() {
            return Ok(Some(u));
        }
        let until = deadline(timeout);
        loop {
            let Some(msg) = self.read_message(until, None)? else {
                return Ok(None);
            };
            self.handle(msg)?;
            if let Some(u) = self.pending.pop_front() {
                return Ok(Some(u));
            }
        }
    }

    /// Takes updates until `done` holds for the replica or `timeout`
    /// passes; whether it holds.
    pub fn wait_until(
        &mut self,
        timeout: Duration,
        mut done: impl FnMut(&Replica) -> bool,
    ) -> Result<bool> {
        let until = deadline(timeout);
        loop {
            if done(&self.replica) {
                return Ok(true);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            self.next_update(left)?;
        }
    }

    /// Runs a transaction: the per-operation results, or
    /// [`Error::Transaction`] naming the failed operation and the server's
    /// error (then nothing was changed). When the database's schema is
    /// known (after [`get_schema`](Self::get_schema) or
    /// [`monitor`](Self::monitor)), tables and columns are checked first.
    /// The changes come back to the replica as an `update`, usually before
    /// the reply.
    pub fn transact(&mut self, db: &str, ops: &[Operation]) -> Result<Vec<OpResult>> {
        if let Some(schema) = self.schemas.get(db) {
            for op in ops {
                if let Some(table) = op.table() {
                    schema.table(table)?;
                    for c in op.columns() {
                        schema.check_column(table, c)?;
                    }
                }
            }
        }
        let result = self.call("transact", transact_params(db, ops))?;
        parse_transact_result(ops, &result)
    }
}
