//! The crate's error type.

use std::io;

/// Everything that can go wrong talking to an OVSDB server or reading
/// what it sent. Each message names the method, table, column or the
/// server's own error text, so that it can be logged as it is.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An address that is neither `unix:PATH` nor `tcp:IP:PORT`.
    #[error("bad OVSDB address {address:?}: {reason}")]
    BadAddress {
        /// The address as given.
        address: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Connecting, reading or writing failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. `connecting to unix:/run/db.sock`.
        context: String,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The server closed the connection (or it broke). The client must be
    /// reconnected with [`Client::reconnect`](crate::Client::reconnect).
    #[error("connection to {address} closed{}", waiting_for.as_ref().map(|m| format!(" while waiting for the reply to {m}")).unwrap_or_default())]
    Disconnected {
        /// The server's address.
        address: String,
        /// The method whose reply was awaited, if any.
        waiting_for: Option<String>,
    },
    /// The client is not connected (after a disconnect, until
    /// [`Client::reconnect`](crate::Client::reconnect) succeeds).
    #[error("not connected to {address}")]
    NotConnected {
        /// The server's address.
        address: String,
    },
    /// No reply within the client's timeout.
    #[error("no reply to {method} from {address} within {timeout_ms} ms")]
    Timeout {
        /// The method that was sent.
        method: String,
        /// The server's address.
        address: String,
        /// The timeout in milliseconds.
        timeout_ms: u128,
    },
    /// Bytes that are not JSON.
    #[error("malformed JSON from the server: {0}")]
    Json(#[source] serde_json::Error),
    /// JSON that is not a valid JSON-RPC message or OVSDB reply.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// JSON that is not a valid OVSDB value (atom, set or map).
    #[error("malformed OVSDB value {json}: {reason}")]
    BadValue {
        /// The JSON, abbreviated.
        json: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A schema that cannot be read.
    #[error("malformed schema: {0}")]
    Schema(String),
    /// The server answered a request with an error.
    #[error("{method} failed: {error}{}", details.as_ref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Server {
        /// The method, e.g. `monitor`.
        method: String,
        /// The server's error, e.g. `unknown database`.
        error: String,
        /// The server's details, if any.
        details: Option<String>,
    },
    /// A `transact` whose operation (or commit) failed: nothing was
    /// changed.
    #[error("transaction failed at {}: {error}{}", describe_op(*index, op), details.as_ref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Transaction {
        /// The index of the failed operation; equal to the number of
        /// operations when the commit itself failed (e.g. a constraint
        /// violation).
        index: usize,
        /// The failed operation's name (`insert`, ...) or `commit`.
        op: String,
        /// The server's error, e.g. `constraint violation`.
        error: String,
        /// The server's details, if any.
        details: Option<String>,
    },
    /// A table the schema does not have.
    #[error("database has no table {table}")]
    NoSuchTable {
        /// The table.
        table: String,
    },
    /// A column the schema's table does not have.
    #[error("table {table} has no column {column}")]
    NoSuchColumn {
        /// The table.
        table: String,
        /// The column.
        column: String,
    },
    /// A row without the column (it was not monitored, or there is no
    /// schema to tell that it is a column at all).
    #[error("row {uuid} of table {table} has no value for column {column} (not monitored?)")]
    MissingColumn {
        /// The table.
        table: String,
        /// The row's UUID.
        uuid: String,
        /// The column.
        column: String,
    },
    /// A column whose value is not of the type asked for.
    #[error("table {table} column {column}: expected {expected}, found {found}")]
    Type {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// What the accessor wanted, e.g. `a string`.
        expected: String,
        /// What the row holds, abbreviated.
        found: String,
    },
}

fn describe_op(index: usize, op: &str) -> String {
    if op == "commit" {
        "commit".to_string()
    } else {
        format!("operation {index} ({op})")
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// JSON abbreviated for error messages (at most ~80 characters).
pub(crate) fn abbreviate(json: &serde_json::Value) -> String {
    let s = json.to_string();
    if s.len() <= 80 {
        s
    } else {
        let mut end = 77;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &s[..end])
    }
}
