//! The client side: one connection, requests answered in order.

use crate::UnixctlError;
use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// A connection to a control socket.
#[derive(Debug)]
pub struct Client {
    s: UnixStream,
    path: String,
    next_id: u64,
    timeout: Duration,
    buf: Vec<u8>,
}

impl Client {
    /// Connects to `path`; each call waits at most `timeout` for its answer.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Client, UnixctlError> {
        let p = path.display().to_string();
        let s = UnixStream::connect(path).map_err(|source| UnixctlError::Socket {
            path: p.clone(),
            what: "cannot connect",
            hint: match source.kind() {
                ErrorKind::NotFound | ErrorKind::ConnectionRefused => {
                    " (is flowpath switch running? --ctl names its socket)"
                }
                ErrorKind::PermissionDenied => " (run as root?)",
                _ => "",
            },
            err: source,
        })?;
        let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
        let _ = s.set_write_timeout(Some(timeout));
        Ok(Client {
            s,
            path: p,
            next_id: 0,
            timeout,
            buf: Vec::new(),
        })
    }

    fn proto(&self, msg: impl Into<String>) -> UnixctlError {
        UnixctlError::Protocol {
            path: self.path.clone(),
            msg: msg.into(),
        }
    }

    /// Calls `method`: `Ok(Ok(text))` on success, `Ok(Err(text))` for the
    /// command's error, `Err` for a transport or protocol failure.
    pub fn call(
        &mut self,
        method: &str,
        params: &[String],
    ) -> Result<Result<String, String>, UnixctlError> {
        let id = self.next_id;
        self.next_id += 1;
        let req = json!({"id": id, "method": method, "params": params}).to_string();
        self.s
            .write_all(req.as_bytes())
            .map_err(|e| self.proto(format!("cannot send the request: {e}")))?;
        let t0 = Instant::now();
        let mut chunk = [0u8; 65536];
        loop {
            let mut it = serde_json::Deserializer::from_slice(&self.buf).into_iter::<Value>();
            match it.next() {
                Some(Ok(v)) => {
                    let used = it.byte_offset();
                    self.buf.drain(..used);
                    if v.get("id") != Some(&json!(id)) {
                        return Err(self.proto(format!("reply with an unexpected id: {v}")));
                    }
                    return match (v.get("error"), v.get("result")) {
                        (Some(Value::String(e)), _) => Ok(Err(e.clone())),
                        (_, Some(Value::String(r))) => Ok(Ok(r.clone())),
                        (Some(e), _) if !e.is_null() => Ok(Err(e.to_string())),
                        _ => Err(self.proto(format!("reply without result or error: {v}"))),
                    };
                }
                Some(Err(e)) if e.is_eof() => {}
                Some(Err(e)) => return Err(self.proto(format!("malformed reply: {e}"))),
                None => {}
            }
            if t0.elapsed() > self.timeout {
                return Err(self.proto(format!(
                    "no answer to \"{method}\" within {} s",
                    self.timeout.as_secs()
                )));
            }
            match self.s.read(&mut chunk) {
                Ok(0) => return Err(self.proto("the switch closed the connection")),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(self.proto(format!("read: {e}"))),
            }
        }
    }
}
