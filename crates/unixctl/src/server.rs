//! The server side: accept, frame, parse, dispatch, reply.

use crate::{CommandSpec, Handler, UnixctlError};
use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Largest request (bytes buffered without a complete JSON value).
pub const MAX_REQUEST: usize = 1 << 20;
/// Most connections served at once; more are closed at once.
pub const MAX_CLIENTS: usize = 64;
/// A connection idle this long (no complete request) is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often blocked threads look at the stop flag.
const TICK: Duration = Duration::from_millis(50);

/// A parsed request.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The id to echo.
    pub id: Value,
    /// The method.
    pub method: String,
    /// The arguments.
    pub params: Vec<String>,
}

/// Why a request was refused.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestError {
    /// The id, if one could be read.
    pub id: Value,
    /// The message.
    pub msg: String,
}

/// Parses one complete JSON value as a request.
pub fn parse_request(bytes: &[u8]) -> Result<Request, RequestError> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| RequestError {
        id: Value::Null,
        msg: format!("malformed JSON-RPC request: {e}"),
    })?;
    request_from_value(v)
}

fn request_from_value(v: Value) -> Result<Request, RequestError> {
    let Value::Object(mut o) = v else {
        return Err(RequestError {
            id: Value::Null,
            msg: "request is not a JSON object".into(),
        });
    };
    let id = o.remove("id").unwrap_or(Value::Null);
    let err = |msg: &str| RequestError {
        id: id.clone(),
        msg: msg.to_string(),
    };
    let method = match o.remove("method") {
        Some(Value::String(m)) => m,
        _ => return Err(err("request has no \"method\" string")),
    };
    let params = match o.remove("params") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => {
            let mut out = Vec::with_capacity(a.len());
            for p in a {
                match p {
                    Value::String(s) => out.push(s),
                    _ => return Err(err("\"params\" must be an array of strings")),
                }
            }
            out
        }
        Some(_) => return Err(err("\"params\" must be an array of strings")),
    };
    Ok(Request { id, method, params })
}

struct Inner {
    commands: Vec<CommandSpec>,
    handler: Arc<dyn Handler>,
    stop: AtomicBool,
    clients: AtomicUsize,
    idle_timeout: Duration,
}

/// A control socket being served. Stops and removes its socket on
/// [`Server::shutdown`] or drop.
pub struct Server {
    path: PathBuf,
    inner: Arc<Inner>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds `path` (creating its directory) and serves `commands` with
    /// `handler`. A socket file left by a dead process is replaced; one a
    /// live process serves is refused.
    pub fn bind(
        path: &Path,
        commands: Vec<CommandSpec>,
        handler: Arc<dyn Handler>,
    ) -> Result<Server, UnixctlError> {
        Self::bind_with_timeout(path, commands, handler, IDLE_TIMEOUT)
    }

    /// [`Server::bind`] with another idle timeout (tests).
    pub fn bind_with_timeout(
        path: &Path,
        commands: Vec<CommandSpec>,
        handler: Arc<dyn Handler>,
        idle_timeout: Duration,
    ) -> Result<Server, UnixctlError> {
        let p = path.display().to_string();
        let sock_err = |what, source: std::io::Error| {
            let hint = match source.kind() {
                ErrorKind::PermissionDenied => "; needs permission to write there (root for /run)",
                _ => "",
            };
            UnixctlError::Socket {
                path: p.clone(),
                what,
                err: source,
                hint,
            }
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| sock_err("cannot create the directory", e))?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(UnixctlError::InUse(p));
            }
            std::fs::remove_file(path)
                .map_err(|e| sock_err("cannot remove the stale socket", e))?;
        }
        // A blocking listener: a client is served the moment it connects;
        // `stop` wakes the accepting thread with a connection of its own.
        let listener = UnixListener::bind(path).map_err(|e| sock_err("cannot bind", e))?;
        let mut commands = commands;
        commands.push(CommandSpec {
            name: "list-commands".into(),
            usage: String::new(),
            min_args: 0,
            max_args: 0,
        });
        commands.sort_by(|a, b| a.name.cmp(&b.name));
        commands.dedup_by(|a, b| a.name == b.name);
        let inner = Arc::new(Inner {
            commands,
            handler,
            stop: AtomicBool::new(false),
            clients: AtomicUsize::new(0),
            idle_timeout,
        });
        let i2 = inner.clone();
        let accept = std::thread::Builder::new()
            .name("unixctl".into())
            .spawn(move || accept_loop(listener, i2))
            .map_err(|e| sock_err("cannot start the server thread", e))?;
        Ok(Server {
            path: path.to_path_buf(),
            inner,
            accept: Some(accept),
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Connections being served now.
    pub fn clients(&self) -> usize {
        self.inner.clients.load(Ordering::Relaxed)
    }

    /// Stops serving and removes the socket file.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            // Wakes the thread blocked in accept(2); if the socket file is
            // gone (someone removed it), that thread stays parked there
            // and ends with the process.
            if UnixStream::connect(&self.path).is_ok() {
                let _ = t.join();
            }
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("path", &self.path).finish()
    }
}

fn accept_loop(listener: UnixListener, inner: Arc<Inner>) {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    while !inner.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok(_) if inner.stop.load(Ordering::Relaxed) => break,
            Ok((stream, _)) => {
                if inner.clients.load(Ordering::Relaxed) >= MAX_CLIENTS {
                    drop(stream); // too many: closed at once
                    continue;
                }
                inner.clients.fetch_add(1, Ordering::Relaxed);
                let i2 = inner.clone();
                match std::thread::Builder::new()
                    .name("unixctl-conn".into())
                    .spawn(move || {
                        serve(stream, &i2);
                        i2.clients.fetch_sub(1, Ordering::Relaxed);
                    }) {
                    Ok(h) => conns.push(h),
                    Err(_) => {
                        inner.clients.fetch_sub(1, Ordering::Relaxed);
                    }
                }
                conns.retain(|h| !h.is_finished());
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // Out of descriptors and the like: wait a little for them.
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    for h in conns {
        let _ = h.join();
    }
}

/// Serves one connection until it closes, errs, idles out or the server
/// stops.
fn serve(mut s: UnixStream, inner: &Inner) {
    if s.set_nonblocking(false).is_err() || s.set_read_timeout(Some(TICK)).is_err() {
        return;
    }
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut last = Instant::now();
    loop {
        // Answer every complete request in the buffer.
        loop {
            let mut it = serde_json::Deserializer::from_slice(&buf).into_iter::<Value>();
            match it.next() {
                Some(Ok(v)) => {
                    let used = it.byte_offset();
                    buf.drain(..used);
                    let reply = match request_from_value(v) {
                        Ok(req) => dispatch(inner, req),
                        Err(e) => {
                            let _ = write_reply(&mut s, &e.id, Err(&e.msg));
                            return;
                        }
                    };
                    if write_reply(&mut s, &reply.0, reply.1.as_deref().map_err(|e| e.as_str()))
                        .is_err()
                    {
                        return;
                    }
                    last = Instant::now();
                }
                Some(Err(e)) if e.is_eof() => break,
                Some(Err(e)) => {
                    let _ = write_reply(
                        &mut s,
                        &Value::Null,
                        Err(&format!("malformed JSON-RPC request: {e}")),
                    );
                    return;
                }
                None => {
                    buf.clear();
                    break;
                }
            }
        }
        if buf.len() > MAX_REQUEST {
            return;
        }
        if inner.stop.load(Ordering::Relaxed) || last.elapsed() > inner.idle_timeout {
            return;
        }
        match s.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => return,
        }
    }
}

/// Answers a request: (id, result or error).
fn dispatch(inner: &Inner, req: Request) -> (Value, Result<String, String>) {
    let Request { id, method, params } = req;
    let Some(spec) = inner.commands.iter().find(|c| c.name == method) else {
        return (
            id,
            Err(format!(
                "\"{method}\" is not a valid command (use \"list-commands\" to see a list of valid commands)"
            )),
        );
    };
    if params.len() < spec.min_args {
        return (
            id,
            Err(format!(
                "\"{method}\" command requires at least {} arguments",
                spec.min_args
            )),
        );
    }
    if params.len() > spec.max_args {
        return (
            id,
            Err(format!(
                "\"{method}\" command takes at most {} arguments",
                spec.max_args
            )),
        );
    }
    if method == "list-commands" {
        let mut out = String::from("The available commands are:\n");
        for c in &inner.commands {
            out.push_str(&format!("  {:<23} {}\n", c.name, c.usage));
        }
        return (id, Ok(out));
    }
    let h = inner.handler.clone();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.call(&method, &params)));
    match r {
        Ok(r) => (id, r),
        Err(_) => (
            id,
            Err(format!(
                "\"{method}\" failed: internal error (handler panicked)"
            )),
        ),
    }
}

fn write_reply(s: &mut UnixStream, id: &Value, r: Result<&str, &str>) -> std::io::Result<()> {
    let v = match r {
        Ok(t) => json!({"id": id, "result": t, "error": null}),
        // Error text ends with a newline, as OVS's does: `ovs-appctl`
        // prints it as it is and then its own "server returned an error"
        // line.
        Err(e) if e.ends_with('\n') => json!({"id": id, "result": null, "error": e}),
        Err(e) => json!({"id": id, "result": null, "error": format!("{e}\n")}),
    };
    let mut bytes = v.to_string().into_bytes();
    bytes.push(b'\n');
    s.write_all(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_bad_ones_are_refused() {
        let r = parse_request(br#"{"id":3,"method":"version","params":[]}"#).unwrap();
        assert_eq!(
            (r.id, r.method.as_str(), r.params.len()),
            (json!(3), "version", 0)
        );
        let r = parse_request(br#"{"id":"x","method":"a","params":["1","2"]}"#).unwrap();
        assert_eq!(r.params, vec!["1", "2"]);
        for (bad, id, msg) in [
            (&br#"{"id":1,"params":[]}"#[..], json!(1), "no \"method\""),
            (
                br#"{"id":1,"method":"a","params":[1]}"#,
                json!(1),
                "array of strings",
            ),
            (
                br#"{"id":1,"method":"a","params":"x"}"#,
                json!(1),
                "array of strings",
            ),
            (br#"[1,2]"#, Value::Null, "not a JSON object"),
            (br#"{"id":1,"#, Value::Null, "malformed"),
        ] {
            let e = parse_request(bad).unwrap_err();
            assert_eq!(e.id, id);
            assert!(e.msg.contains(msg), "{}", e.msg);
        }
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = parse_request(&b);
        }
    }
}
