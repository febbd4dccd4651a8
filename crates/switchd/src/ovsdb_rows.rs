//! Reading OVSDB rows: what an `Interface` row asks for (a port spec,
//! the bridge's LOCAL port, or a refusal with its reason), a `Port` row's
//! 802.1Q mode, and Open vSwitch's error text for a missing device. Pure
//! functions over the replica, used by [`crate::ovsdb_sync`].

use flowpath_ofproto::normal::VlanMode;
use flowpath_ovsdb::{Error, RowRef};

/// The interface types flowpath takes (`Open_vSwitch.iface_types`).
pub(crate) const IFACE_TYPES: &[&str] = &[
    "afxdp",
    "dpdkvhostuser",
    "dpdkvhostuserclient",
    "geneve",
    "gre",
    "internal",
    "patch",
    "system",
    "tap",
    "vxlan",
];

/// What one interface row asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    /// A port: the spec and the number asked for.
    Port(String, Option<u32>),
    /// Something flowpath cannot make: the error written.
    Refused(String),
}

/// What interface `i` asks for on bridge `bridge`; server-mode vhost-user
/// sockets go in `sock_dir`.
pub(crate) fn want(
    i: &RowRef<'_>,
    bridge: &str,
    sock_dir: &std::path::Path,
) -> Result<(String, Want), Error> {
    let name = i.string("name")?.to_string();
    let ty = i.string("type")?;
    let options = i.string_map("options")?;
    let req = i
        .optional_integer("ofport_request")?
        .and_then(|n| u32::try_from(n).ok());
    let w = match ty {
        "" | "system" => Want::Port(format!("afpacket:{name}"), req),
        "afxdp" => {
            let mut spec = format!("afxdp:{name}");
            match options.get("xdp-mode").copied() {
                Some("native-with-zerocopy") | Some("native") => spec.push_str(",mode=native"),
                Some("generic") => spec.push_str(",mode=generic"),
                _ => {}
            }
            if let Some(n) = options.get("n_rxq") {
                spec.push_str(&format!(",queues={n}"));
            }
            Want::Port(spec, req)
        }
        // OVS-DPDK's server-mode vhost-user port: the socket is made in
        // the run directory (`other_config:vhost-sock-dir`), named after
        // the interface.
        "dpdkvhostuser" => Want::Port(
            format!("vhost-user:{},server", sock_dir.join(&name).display()),
            req,
        ),
        // OVS-DPDK's client-mode vhost-user port: flowpath connects to the
        // socket the VM (QEMU in server mode) or DPDK application opened.
        "dpdkvhostuserclient" => match options.get("vhost-server-path") {
            Some(path) => Want::Port(format!("vhost-user:{path},client"), req),
            None => Want::Refused(
                "type dpdkvhostuserclient needs options:vhost-server-path".to_string(),
            ),
        },
        // Tunnels over the switch's underlay (`--underlay`, or another
        // bridge's LOCAL interface, see `crate::underlay_kernel`), their options
        // as `--port N=vxlan:...` takes them (`key`, or `in_key` and
        // `out_key` apart, as OVS).
        "vxlan" | "geneve" | "gre" => {
            let o: Vec<String> = options.iter().map(|(k, v)| format!("{k}={v}")).collect();
            Want::Port(format!("{ty}:{}", o.join(",")), req)
        }
        // Open vSwitch's patch interfaces: a pair joining two bridges.
        "patch" => match options.get("peer") {
            Some(peer) if !peer.is_empty() => Want::Port(format!("patch:{name},peer={peer}"), req),
            _ => Want::Refused("patch: missing or empty peer option".to_string()),
        },
        // The bridge's own interface, OVS's LOCAL port: a tap named after
        // the bridge, OpenFlow port 65534.
        "internal" if name == bridge => Want::Port(
            format!("tap:{name}"),
            Some(flowpath_ofproto::action::OFPP_LOCAL),
        ),
        "internal" | "tap" => Want::Port(format!("tap:{name}"), req),
        other => Want::Refused(format!(
            "flowpath does not support interface type {other:?} (it takes {})",
            IFACE_TYPES.join(", ")
        )),
    };
    Ok((name, w))
}

/// A `Port` row's 802.1Q mode for `NORMAL` (`tag`, `trunks`,
/// `vlan_mode`, with Open vSwitch's defaults).
pub(crate) fn vlan_mode(p: &RowRef<'_>) -> Result<VlanMode, String> {
    let tag = p.optional_integer("tag").map_err(|e| e.to_string())?;
    let trunks: Vec<u16> = p
        .integers("trunks")
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter_map(|v| u16::try_from(v).ok())
        .collect();
    let mode = p.optional_string("vlan_mode").map_err(|e| e.to_string())?;
    let tag = tag.and_then(|t| u16::try_from(t).ok());
    let trunk = |mut t: Vec<u16>| {
        if t.is_empty() {
            VlanMode::TrunkAll
        } else {
            t.sort_unstable();
            t.dedup();
            VlanMode::Trunk(t)
        }
    };
    match (mode, tag) {
        // As OVS: a tag without a mode makes an access port (trunks are
        // then ignored).
        (None, Some(t)) => Ok(VlanMode::Access(t)),
        (None, None) | (Some("trunk"), _) => Ok(trunk(trunks)),
        (Some("access"), t) => Ok(VlanMode::Access(t.unwrap_or(0))),
        (Some("native-tagged"), t) => Ok(VlanMode::native(t.unwrap_or(0), trunks, false)),
        (Some("native-untagged"), t) => Ok(VlanMode::native(t.unwrap_or(0), trunks, true)),
        (Some(m), _) => Err(format!("vlan_mode {m:?} is not one flowpath knows")),
    }
}

/// OVS's text for a port whose device cannot be opened, where it is that
/// case; flowpath's own message otherwise.
pub(crate) fn ovs_error(name: &str, spec: &str, e: &str) -> String {
    // (A tunnel has no device: its own error.)
    if !flowpath_ofproto::tunnel::is_tunnel_spec(spec)
        && !std::path::Path::new("/sys/class/net").join(name).exists()
    {
        format!("could not open network device {name} (No such device)")
    } else {
        e.trim().to_string()
    }
}
