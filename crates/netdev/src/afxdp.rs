//! AF_XDP ports (being written).

use crate::{NetdevError, OpenPort, PortSpec};

/// Opens an `afxdp:` port.
pub fn open(spec: &PortSpec) -> Result<OpenPort, NetdevError> {
    Err(NetdevError::BadSpec {
        spec: spec.to_string(),
        reason: "afxdp ports are not built yet".into(),
    })
}
