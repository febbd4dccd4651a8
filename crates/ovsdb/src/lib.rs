//! A blocking client for OVSDB, the database protocol of Open vSwitch
//! (RFC 7047), as `ovsdb-server` speaks it: enough to read a switch's
//! configuration live from the `Open_vSwitch` database and to write back
//! what the switch reports (`Interface.ofport`, `error`, `statistics`,
//! `Open_vSwitch.cur_cfg`, ...).
//!
//! # Layers
//!
//! The crate is built in layers; the lower ones do no I/O and can be used
//! (and are tested) on their own.
//!
//! * [`value`]: OVSDB values in their JSON encoding. An [`Atom`] is an
//!   integer, real, boolean, string, `["uuid", "..."]` or `["named-uuid",
//!   "..."]`; a [`Value`] is one atom, a set `["set", [...]]` or a map
//!   `["map", [[k, v], ...]]`. A one-element set may come as the bare atom:
//!   [`Value::as_set`] reads both forms alike, and an empty set is an
//!   optional column's "no value".
//! * [`schema`]: a minimal schema reader ([`DatabaseSchema`]): tables,
//!   columns, their types with `min`/`max`, enums and references. It is
//!   what lets the client say "table Bridge has no column nmae" instead
//!   of sending a request the server would reject.
//! * [`rpc`]: JSON-RPC 1.0 messages ([`Message`]: requests, replies, error
//!   replies, notifications) and the [`Framer`] that cuts the byte stream
//!   into messages (they come back to back, with or without whitespace).
//! * [`ops`]: `transact` operations ([`Operation`]: insert, update, mutate,
//!   delete, select, wait, comment, with [`Condition`]s and
//!   [`Mutation`]s) and their per-operation results ([`OpResult`]).
//! * [`replica`]: a [`Replica`] of the monitored tables (table → row UUID
//!   → column → value), filled from a `monitor` reply and kept current by
//!   `update` notifications (insert, modify, delete); rows are read through
//!   [`RowRef`]'s typed getters (`string`, `integer`, `optional_integer`,
//!   `boolean`, `uuids`, `strings`, `string_map`, `integer_map`, ...),
//!   whose errors name the table and column.
//! * [`Client`]: one connection to `unix:PATH`, `tcp:IP:PORT` or `ssl:IP:PORT`.
//!
//! # The client
//!
//! [`Client`] is blocking and single-threaded: it reads only while one of
//! its methods runs, on the caller's thread, so there is no reader thread
//! and no lock. While it waits for a reply it answers the server's `echo`
//! requests (the server's inactivity probe) and applies `update`
//! notifications to the replica; those updates are also queued, and
//! [`Client::next_update`] returns them first before waiting (up to a
//! timeout) for more. A caller that runs an event loop calls
//! `next_update` with a short timeout from it, or
//! [`Client::wait_until`] to wait for a state of the replica.
//!
//! ```no_run
//! use std::time::Duration;
//! use flowpath_ovsdb::{Client, Condition, Operation, TableMonitor, Value};
//!
//! # fn main() -> Result<(), flowpath_ovsdb::Error> {
//! let mut client = Client::connect("unix:/var/run/openvswitch/db.sock")?;
//! client.monitor(
//!     "Open_vSwitch",
//!     &[
//!         TableMonitor::all("Bridge"),
//!         TableMonitor::columns("Interface", &["name", "type", "ofport_request"]),
//!     ],
//! )?;
//! for bridge in client.replica().rows("Bridge") {
//!     println!("{} {}", bridge.string("name")?, bridge.string("datapath_type")?);
//! }
//! // Report the port number chosen for p1.
//! client.transact(
//!     "Open_vSwitch",
//!     &[Operation::Update {
//!         table: "Interface".into(),
//!         conditions: vec![Condition::eq("name", "p1")],
//!         row: [("ofport".to_string(), Value::from(5))].into(),
//!     }],
//! )?;
//! while let Some(changes) = client.next_update(Duration::from_secs(1))? {
//!     println!("{} rows changed", changes.len());
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Disconnects
//!
//! When the server closes the connection (or it breaks, or the server
//! sends something unreadable) the method that noticed returns
//! [`Error::Disconnected`] (or the error seen) and the client is
//! disconnected: [`Client::is_connected`] is false and further calls
//! return [`Error::NotConnected`]. The replica keeps its last contents
//! until [`Client::reconnect`] connects again and, when a monitor was set
//! up, monitors the same tables from scratch, rebuilding the replica from
//! the server's current rows. `reconnect` makes one attempt; the caller
//! retries with the back-off it wants.
//!
//! # Limits
//!
//! The client speaks `monitor` (version 1 updates, with full rows);
//! `monitor_cond`, locks and TLS (`ssl:`) are not supported.
#![forbid(unsafe_code)]

mod client;
mod error;
pub mod ops;
pub mod replica;
pub mod rpc;
pub mod schema;
pub mod value;

pub use client::{Address, Client, TableMonitor, TlsConfig, DEFAULT_TIMEOUT};
pub use error::{Error, Result};
pub use ops::{Condition, Mutation, OpResult, Operation};
pub use replica::{ChangeKind, Replica, RowChange, RowRef};
pub use rpc::{Framer, Message};
pub use schema::{AtomicType, BaseType, ColumnSchema, ColumnType, DatabaseSchema, TableSchema};
pub use value::{Atom, Row, Uuid, Value};
