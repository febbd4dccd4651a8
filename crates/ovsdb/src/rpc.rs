//! JSON-RPC 1.0 as ovsdb-server speaks it (RFC 7047 section 4): message
//! shapes and stream framing, without I/O.

use serde_json::{json, Value as Json};

use crate::error::{abbreviate, Error, Result};

/// One JSON-RPC message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// A request: `{"method", "params", "id"}` with a non-null id.
    Request {
        /// The method, e.g. `transact` or `echo`.
        method: String,
        /// The parameters (an array).
        params: Json,
        /// The id the reply must carry.
        id: Json,
    },
    /// A notification: a request with a null id, e.g. `update`.
    Notification {
        /// The method.
        method: String,
        /// The parameters (an array).
        params: Json,
    },
    /// A successful reply.
    Response {
        /// The result.
        result: Json,
        /// The request's id.
        id: Json,
    },
    /// A failed reply.
    Error {
        /// The error (an object with `error` and perhaps `details`, or a
        /// string).
        error: Json,
        /// The request's id.
        id: Json,
    },
}

impl Message {
    /// The message's JSON.
    pub fn to_json(&self) -> Json {
        match self {
            Message::Request { method, params, id } => {
                json!({"method": method, "params": params, "id": id})
            }
            Message::Notification { method, params } => {
                json!({"method": method, "params": params, "id": null})
            }
            Message::Response { result, id } => json!({"result": result, "error": null, "id": id}),
            Message::Error { error, id } => json!({"result": null, "error": error, "id": id}),
        }
    }

    /// Reads a message's JSON.
    pub fn from_json(json: Json) -> Result<Message> {
        let bad = |reason: &str| Error::Protocol(format!("{reason}: {}", abbreviate(&json)));
        let Json::Object(mut obj) = json.clone() else {
            return Err(bad("a JSON-RPC message is not an object"));
        };
        let id = obj.remove("id").unwrap_or(Json::Null);
        if let Some(method) = obj.remove("method") {
            let Json::String(method) = method else {
                return Err(bad("method is not a string"));
            };
            let params = obj.remove("params").unwrap_or(Json::Null);
            if !params.is_array() {
                return Err(bad("params is not an array"));
            }
            return Ok(if id.is_null() {
                Message::Notification { method, params }
            } else {
                Message::Request { method, params, id }
            });
        }
        let result = obj.remove("result");
        let error = obj.remove("error").unwrap_or(Json::Null);
        match (result, error) {
            (_, error) if !error.is_null() => Ok(Message::Error { error, id }),
            (Some(result), _) => Ok(Message::Response { result, id }),
            (None, _) => Err(bad("neither a request nor a reply")),
        }
    }

    /// The message as bytes for the wire.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serialising a `serde_json::Value` cannot fail.
        serde_json::to_vec(&self.to_json()).unwrap_or_default()
    }
}

/// Splits a byte stream into JSON values: the server sends messages back
/// to back, with or without whitespace between them.
///
/// Each byte is scanned once (nesting depth, strings and escapes) to find
/// where a message ends, and only a complete message is parsed, so a
/// large message that arrives in many reads costs no more than one that
/// arrives at once.
#[derive(Debug, Default)]
pub struct Framer {
    buf: Vec<u8>,
    /// How far `buf` has been scanned for the end of its first message.
    scanned: usize,
    depth: usize,
    in_string: bool,
    escape: bool,
}

/// The most bytes one message may take before the stream is refused.
pub const MAX_MESSAGE: usize = 256 << 20;

impl Framer {
    /// An empty framer.
    pub fn new() -> Framer {
        Framer::default()
    }

    /// Adds received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not yet taken as a message.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next complete message, `Ok(None)` when more bytes are needed.
    /// An error (malformed JSON, a message over [`MAX_MESSAGE`]) leaves
    /// the stream unusable: the connection should be closed.
    pub fn next_message(&mut self) -> Result<Option<Message>> {
        if self.scanned == 0 {
            let start = self
                .buf
                .iter()
                .position(|b| !b.is_ascii_whitespace())
                .unwrap_or(self.buf.len());
            self.buf.drain(..start);
            match self.buf.first() {
                None => return Ok(None),
                Some(b'{') => {}
                Some(&b) => {
                    return Err(Error::Protocol(format!(
                        "a JSON-RPC message does not start with '{{' but {:?}",
                        b as char
                    )))
                }
            }
        }
        let mut end = None;
        for (i, &b) in self.buf.iter().enumerate().skip(self.scanned) {
            if self.in_string {
                if self.escape {
                    self.escape = false;
                } else if b == b'\\' {
                    self.escape = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        end = Some(i + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else {
            self.scanned = self.buf.len();
            if self.buf.len() > MAX_MESSAGE {
                return Err(Error::Protocol(format!(
                    "message longer than {MAX_MESSAGE} bytes"
                )));
            }
            return Ok(None);
        };
        let parsed = serde_json::from_slice::<Json>(&self.buf[..end]);
        self.buf.drain(..end);
        self.scanned = 0;
        self.depth = 0;
        self.in_string = false;
        self.escape = false;
        Message::from_json(parsed.map_err(Error::Json)?).map(Some)
    }
}

/// Reads an error reply's `error` member: `(error, details)`.
pub fn error_text(error: &Json) -> (String, Option<String>) {
    match error {
        Json::String(s) => (s.clone(), None),
        Json::Object(o) => (
            o.get("error")
                .map(|e| e.as_str().map_or_else(|| e.to_string(), String::from))
                .unwrap_or_else(|| error.to_string()),
            o.get("details")
                .map(|d| d.as_str().map_or_else(|| d.to_string(), String::from)),
        ),
        other => (other.to_string(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let msgs = [
            Message::Request {
                method: "echo".into(),
                params: json!([]),
                id: json!("echo"),
            },
            Message::Notification {
                method: "update".into(),
                params: json!([null, {}]),
            },
            Message::Response {
                result: json!(["Open_vSwitch"]),
                id: json!(3),
            },
            Message::Error {
                error: json!({"error": "unknown database", "details": "x"}),
                id: json!(4),
            },
        ];
        for m in msgs {
            assert_eq!(Message::from_json(m.to_json()).unwrap(), m);
        }
    }

    #[test]
    fn frames_back_to_back_and_split_messages() {
        let a = Message::Response {
            result: json!({"k": "a}b{\\\"]", "l": [[], {}], "big": "x".repeat(100_000)}),
            id: json!(1),
        };
        let b = Message::Notification {
            method: "update".into(),
            params: json!(["m", {}]),
        };
        let mut bytes = a.to_bytes();
        bytes.extend_from_slice(b"\n ");
        bytes.extend_from_slice(&b.to_bytes());
        // Byte by byte: nothing before a message is complete.
        let mut f = Framer::new();
        let mut got = Vec::new();
        for byte in &bytes {
            f.push(std::slice::from_ref(byte));
            while let Some(m) = f.next_message().unwrap() {
                got.push(m);
            }
        }
        assert_eq!(got, vec![a, b]);
        assert_eq!(f.pending(), 0);
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        for bytes in [
            &b"[1, 2]"[..],
            b"{\"id\": 1,}",
            b"{\"method\": 5, \"params\": [], \"id\": 1}",
            b"{\"method\": \"echo\", \"params\": {}, \"id\": 1}",
            b"{\"id\": 1}",
            b"\"text\"",
            b"{\"a\": \xff}",
        ] {
            let mut f = Framer::new();
            f.push(bytes);
            assert!(
                f.next_message().is_err(),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        // Incomplete is not an error.
        let mut f = Framer::new();
        f.push(b"{\"id\": 1, \"result\": [");
        assert!(f.next_message().unwrap().is_none());
    }

    #[test]
    fn error_text_reads_both_forms() {
        assert_eq!(
            error_text(&json!({"error": "syntax error", "details": "bad"})),
            ("syntax error".into(), Some("bad".into()))
        );
        assert_eq!(error_text(&json!("oops")), ("oops".into(), None));
    }
}
