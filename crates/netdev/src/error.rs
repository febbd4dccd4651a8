//! Errors of opening and running ports: each names the port.

/// A port could not be opened or stopped working.
#[derive(Debug, thiserror::Error)]
pub enum NetdevError {
    /// The spec string is malformed.
    #[error("port '{spec}': {reason}")]
    BadSpec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The interface does not exist.
    #[error("port '{port}': no such interface '{ifname}'")]
    NoSuchInterface {
        /// The port's spec.
        port: String,
        /// The interface name.
        ifname: String,
    },
    /// A system call failed.
    #[error("port '{port}': {what}: {err}{hint}")]
    Os {
        /// The port's spec.
        port: String,
        /// What was being done.
        what: String,
        /// The OS error (in the message, so not a `source()`).
        err: std::io::Error,
        /// A hint (privileges, interface busy), with its leading "; ".
        hint: String,
    },
    /// A capture file could not be read or written.
    #[error("port '{port}': {err}")]
    Capture {
        /// The port's spec.
        port: String,
        /// The reader's or writer's error (names the file).
        err: flowpath_io::IoError,
    },
}

impl NetdevError {
    /// An `Os` error for `port` from the last OS error, with a hint for
    /// the usual causes (EPERM/EACCES: privileges; EBUSY: in use).
    pub fn last_os(port: &str, what: impl Into<String>) -> Self {
        Self::os(port, what, std::io::Error::last_os_error())
    }

    /// An `Os` error for `port` from `source`, with a hint.
    pub fn os(port: &str, what: impl Into<String>, source: std::io::Error) -> Self {
        let hint = match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                "; needs root (CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF)".to_string()
            }
            Some(libc::EBUSY) | Some(libc::EEXIST) => {
                "; the interface or queue is already taken (another XDP program or switch?)"
                    .to_string()
            }
            _ => String::new(),
        };
        NetdevError::Os {
            port: port.to_string(),
            what: what.into(),
            err: source,
            hint,
        }
    }
}
