//! `vhost-user:PATH[,server|client][,queues=Q]`: a vhost-user port, the
//! device (backend) side — a VM (QEMU's `vhost-user` netdev) or a DPDK
//! application (`net_virtio_user`) attaches its virtio-net rings to the
//! switch over a Unix socket, as it does to OVS-DPDK's
//! `dpdkvhostuser`/`dpdkvhostuserclient` ports.
//!
//! Server (the default): the switch listens on PATH (a stale socket file
//! there is replaced; the file is removed when the port closes) and
//! serves one frontend at a time. Client: the switch connects to PATH,
//! where the frontend listens, and tries again every second until it is
//! there and after it goes away (OVS's `dpdkvhostuserclient`, which lets
//! the switch restart under a running VM).
//!
//! Shape: a control thread per port (`conn`) reads the messages
//! (`protocol`, a codec without I/O), maps guest memory from the passed
//! descriptors (`memory`, bounds-checked translation) and lays out each
//! virtqueue (`ring`, the split ring over guest memory, or `packed`, the
//! packed one, where every descriptor is checked) and, during a live
//! migration, the frontend's dirty-page bitmap (`log`); the PMDs see a
//! ring only while it runs, handed over through a slot per virtqueue
//! (`queue`, whose module doc states the hand-over protocol: a PMD claims
//! a ring per burst, the control thread withdraws it before it changes
//! anything or unmaps memory).
//!
//! Queues: Q queue pairs (`queues=`, default 1; the frontend's `queues=`
//! should match). Receive queue `i` of the port is the guest's transmit
//! virtqueue `2i+1`; the port has one transmit queue per PMD up to Q,
//! each preferring the guest's receive virtqueue `2i` and using another
//! running, free one when its own is not enabled (a guest that enables
//! fewer queue pairs than Q still receives everything).
//!
//! Features offered: `VIRTIO_F_VERSION_1`, `VIRTIO_NET_F_MRG_RXBUF`,
//! `VIRTIO_NET_F_MQ`, `VIRTIO_RING_F_INDIRECT_DESC`,
//! `VIRTIO_RING_F_EVENT_IDX`, `VHOST_USER_F_PROTOCOL_FEATURES`, the
//! checksum and segmentation offloads `CSUM`, `GUEST_CSUM`, `HOST_TSO4/6`,
//! `GUEST_TSO4/6`, `HOST_ECN`, `GUEST_ECN`, and `GUEST_ANNOUNCE`,
//! `VHOST_F_LOG_ALL`, `VIRTIO_F_RING_PACKED`; protocol features `MQ`,
//! `LOG_SHMFD`, `RARP`, `REPLY_ACK`, `STATUS`. A
//! frame from the guest brings its virtio-net header's offload state
//! (checked against the frame first: `queue`) in its `RxMeta`, as an
//! AF_PACKET port's frames do; the port takes frames with offload state
//! (`takes_vnet_hdr`) and hands the guest what it negotiated as it is,
//! finishing the rest in software (`crate::offload::finish`);
//! `GUEST_ECN`/`HOST_ECN` carry ECN-marked TCP super-frames as they are.
//! Live migration: `VHOST_F_LOG_ALL` with the `LOG_SHMFD` protocol
//! feature — the frontend's dirty-page bitmap is mapped (`log`) and every
//! ring logs the pages it writes while `LOG_ALL` is negotiated;
//! `GUEST_ANNOUNCE` lets the guest announce itself at its new port;
//! `SEND_RARP` (protocol feature `RARP`) makes the port announce one that
//! cannot (a RARP put in front of its frames).
//! `VIRTIO_F_RING_PACKED`: a guest may lay its virtqueues out packed
//! (`packed`) instead of split (`ring`); the queues are written once for
//! both (`ring::VirtRing`). Not offered: UDP fragmentation offload.
//!
//! What a guest can do to the switch: fill or starve its own rings
//! (drops counted on this port), send malformed chains (refused, counted
//! in the queue's `errors`), disconnect at any time. What it cannot:
//! make the switch read or write outside the memory it shared, loop the
//! PMD, or stall other ports — a full guest ring drops at once.

mod conn;
pub mod log;
pub mod memory;
pub mod packed;
pub mod protocol;
mod queue;
pub mod ring;

pub use queue::{VhostRx, VhostTx, MAX_FRAME};

use crate::{NetdevError, OpenPort, PortSpec, RxQueue, TxQueue};
use queue::QueueSlot;
use std::sync::Arc;

/// Opens a `vhost-user:` port with up to `extra` more transmit queues
/// (one per queue pair at most).
pub fn open(spec: &PortSpec, extra: usize) -> Result<OpenPort, NetdevError> {
    let port = spec.to_string();
    let PortSpec::VhostUser {
        path,
        client,
        queues,
    } = spec
    else {
        return Err(NetdevError::BadSpec {
            spec: port,
            reason: "not a vhost-user port".into(),
        });
    };
    let q = *queues as usize;
    let slots = (0..2 * q)
        .map(|_| QueueSlot::new(&port).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    let control = conn::start(&port, path, *client, q, slots.clone())?;
    let rxqs: Vec<Box<dyn RxQueue>> = (0..q)
        .map(|i| Box::new(VhostRx::new(&port, slots[2 * i + 1].clone())) as Box<dyn RxQueue>)
        .collect();
    let guest_rx: Vec<Arc<QueueSlot>> = (0..q).map(|i| slots[2 * i].clone()).collect();
    let ntx = (1 + extra).min(q);
    let mut txs: Vec<Box<dyn TxQueue>> = (0..ntx)
        .map(|i| Box::new(VhostTx::new(guest_rx.clone(), i)) as Box<dyn TxQueue>)
        .collect();
    let tx = txs.remove(0);
    Ok(OpenPort {
        spec: spec.clone(),
        kind: "vhost-user",
        detail: format!(
            "{}, {q} queue pair{}",
            if *client { "client" } else { "server" },
            if q == 1 { "" } else { "s" }
        ),
        rxqs,
        tx,
        more_tx: txs,
        guard: Some(Box::new(control)),
    })
}
