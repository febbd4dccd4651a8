//! The control-socket protocol of Open vSwitch's `unixctl`: JSON-RPC over
//! a Unix stream socket, so that `flowpath ctl` and the real `ovs-appctl
//! -t SOCKET` both talk to a running switch.
//!
//! Protocol (facts from OVS's jsonrpc/unixctl): the stream carries JSON
//! objects back to back, with or without newlines between them. A request
//! is `{"id": ID, "method": "NAME", "params": ["ARG", ...]}`; the reply
//! is `{"id": ID, "result": "TEXT", "error": null}` or `{"id": ID,
//! "result": null, "error": "TEXT"}`. `ovs-appctl` prints the result as
//! it is, or the error on stderr with exit status 2.
//!
//! What this crate does: framing, parsing, the reply shape, `list-commands`
//! (answered from the registry), unknown commands and argument counts
//! (answered with OVS's messages), and the robustness a control socket
//! needs — it knows no command's meaning: a [`Handler`] does.
//!
//! Robustness (each tested): a malformed request gets an error reply (id
//! `null` when none could be read) and the connection is closed; a
//! request over [`MAX_REQUEST`] bytes closes the connection; a client that
//! sends part of a request and stops is closed after the idle timeout
//! without holding up anyone else (one thread per connection, at most
//! [`MAX_CLIENTS`] at once — more are closed at once); a handler that
//! panics gives an error reply and the server goes on. Nothing here
//! panics on any input.
//!
//! Threads: [`Server::bind`] starts an accept thread; each connection
//! gets its own thread that calls the handler (so the handler is `Sync`).
//! [`Server::shutdown`] (or drop) stops them within ~100 ms and removes
//! the socket file.
#![forbid(unsafe_code)]

mod client;
mod server;

pub use client::Client;
pub use server::{parse_request, Request, RequestError, Server, MAX_CLIENTS, MAX_REQUEST};

/// A command the server accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandSpec {
    /// The method name, e.g. `dpif-netdev/pmd-stats-show`.
    pub name: String,
    /// Argument synopsis for `list-commands`, e.g. `[--json]`.
    pub usage: String,
    /// Fewest arguments.
    pub min_args: usize,
    /// Most arguments.
    pub max_args: usize,
}

/// Gives commands their meaning: called on a connection's thread with a
/// registered method and an argument count within its bounds.
pub trait Handler: Send + Sync + 'static {
    /// The result text, or the error text.
    fn call(&self, method: &str, params: &[String]) -> Result<String, String>;
}

impl<F> Handler for F
where
    F: Fn(&str, &[String]) -> Result<String, String> + Send + Sync + 'static,
{
    fn call(&self, method: &str, params: &[String]) -> Result<String, String> {
        self(method, params)
    }
}

/// Transport and protocol errors (a command's own error is not one).
#[derive(Debug, thiserror::Error)]
pub enum UnixctlError {
    /// The socket could not be created or connected to.
    #[error("{path}: {what}: {err}{hint}")]
    Socket {
        /// The socket path.
        path: String,
        /// What was being done.
        what: &'static str,
        /// The OS error.
        err: std::io::Error,
        /// A hint, with its leading "; ".
        hint: &'static str,
    },
    /// Another process serves this socket.
    #[error("{0}: already in use by a running process (another flowpath switch?)")]
    InUse(String),
    /// The peer broke the protocol or closed the connection.
    #[error("{path}: {msg}")]
    Protocol {
        /// The socket path.
        path: String,
        /// What went wrong.
        msg: String,
    },
}
