//! Recirculation: a packet kept for another datapath pass (`recirc(ID)`,
//! `tnl_pop`), copied into the executor's pool or handed over.

use super::{Executor, PacketMeta, Recirculated, MAX_RECIRC_DEPTH, MAX_RECIRC_PENDING};
use crate::packet::PacketBuf;
use flowpath_flow::FlowKey;

/// How a recirculated frame goes into the pool.
pub(super) enum Frame<'a> {
    /// Copied (the packet goes on, or an output queued refers to it).
    Copy(&'a PacketBuf),
    /// Taken: swapped with the pool's spare buffer.
    Take(&'a mut PacketBuf),
}

impl Executor {
    /// Keeps a copy of the packet as it is now for another datapath pass
    /// with `recirc_id` = `id` (its buffer reused from the pool).
    ///
    /// `changed_from`: the key of the pass when the packet changed in it
    /// (its RSS hash, if not kept yet, is that key's). `take`: nothing
    /// refers to the packet's buffer any more (the action list's last
    /// action, no output queued): the pool takes it instead of a copy.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn recirculate(
        &mut self,
        pkt: &mut PacketBuf,
        meta: &mut PacketMeta,
        id: u32,
        tag: u64,
        changed_from: Option<&FlowKey>,
        key: &FlowKey,
        take: bool,
    ) {
        let frame = if take {
            Frame::Take(pkt)
        } else {
            Frame::Copy(pkt)
        };
        if let Some(r) = self.recirculate_frame(frame, meta, id, tag, changed_from) {
            // An unchanged packet's key stays what extraction made of it.
            if changed_from.is_none() {
                r.head.copy_from_slice(&key.w[..super::HEAD_WORDS]);
                r.head_valid = true;
            }
            // (Most recirculated packets carry no tunnel: their 16 zero
            // words are neither copied here nor into the next key.)
            if !key.tunnel_is_zero() {
                r.tnl
                    .copy_from_slice(&key.w[flowpath_flow::key::W_TUN_FIRST..]);
                r.tnl_set = true;
            } else if r.tnl_set {
                r.tnl.fill(0);
                r.tnl_set = false;
            }
        }
    }

    /// [`Executor::recirculate`]'s entry in the pool: the frame copied or
    /// (`Frame::Take`: the caller's buffer, which nothing else refers to any
    /// more) swapped with the pool's spare buffer, no copy; its id,
    /// metadata and tag (the tunnel words left to the caller). `None` when
    /// it was dropped (counted).
    pub(super) fn recirculate_frame(
        &mut self,
        pkt: Frame<'_>,
        meta: &mut PacketMeta,
        id: u32,
        tag: u64,
        changed_from: Option<&FlowKey>,
    ) -> Option<&mut Recirculated> {
        if let (None, Some(key)) = (meta.rss, changed_from) {
            meta.rss = Some(flowpath_flow::ovs_hash::hash_5tuple(key, 0));
        }
        if meta.passes >= MAX_RECIRC_DEPTH {
            self.stats.recirc_too_deep += 1;
            return None;
        }
        if self.recirc_used >= MAX_RECIRC_PENDING {
            self.stats.recirc_overflow += 1;
            return None;
        }
        if self.recirc_used == self.recirc.len() {
            self.recirc.push(Recirculated::default());
        }
        let r = &mut self.recirc[self.recirc_used];
        match pkt {
            Frame::Copy(pkt) => {
                if r.buf.load(pkt.data()).is_err() {
                    // (A frame grown past the largest by pushes.)
                    self.stats.recirc_overflow += 1;
                    return None;
                }
            }
            Frame::Take(pkt) => std::mem::swap(&mut r.buf, pkt),
        }
        r.recirc_id = id;
        r.head_valid = false;
        r.meta = *meta;
        r.meta.passes = meta.passes.saturating_add(1);
        r.tag = tag;
        self.recirc_used += 1;
        self.stats.recirculated += 1;
        Some(r)
    }
}
