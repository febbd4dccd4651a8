//! The rarer branches of action execution, off the common path: the
//! fragments of a reassembled datagram run through the rest of a list,
//! `check_pkt_len`'s branches and `clone(...)`'s copies.

use super::*;

impl Executor {
    /// Runs `rest` (the actions after a `ct` that reassembled a datagram,
    /// from index `base` of the whole list) on each of the datagram's
    /// fragments, with the datagram's tracking state and the rest of the
    /// metadata of the packet that completed it; their outputs are copies.
    #[cold]
    #[inline(never)]
    pub(super) fn run_fragments(
        &mut self,
        frags: Vec<Vec<u8>>,
        meta: &PacketMeta,
        rest: &[DpAction],
        base: usize,
        slot: usize,
        tag: u64,
    ) {
        let mut buf = std::mem::take(&mut self.frag_buf);
        for f in frags {
            if buf.load(&f).is_err() {
                self.stats.dropped += 1;
                continue;
            }
            let (k, layers) = flowpath_flow::extract::extract_with_layers(buf.data(), meta.in_port);
            let fresh = PacketMeta::new(&k, &layers);
            let mut m = PacketMeta {
                l3: fresh.l3,
                l4: fresh.l4,
                nw_proto: fresh.nw_proto,
                ..*meta
            };
            let mut run = Run {
                key: &k,
                slot,
                tag,
                copy_before: usize::MAX,
                trunc: None,
                delivered: false,
                // (The datagram's `ct` ran.)
                ct_ran: true,
            };
            self.run_list(&mut buf, &mut m, rest, base, &mut run);
        }
        self.frag_buf = buf;
    }

    /// `check_pkt_len` at `actions[j]`: runs the branch the packet's
    /// length (the whole frame as it is now) picks.
    #[cold]
    #[inline(never)]
    pub(super) fn check_pkt_len(
        &mut self,
        pkt: &mut PacketBuf,
        meta: &mut PacketMeta,
        actions: &[DpAction],
        j: usize,
        base: usize,
        run: &mut Run,
    ) {
        let Some(&DpAction::CheckPktLen { size, gt, le }) = actions.get(j) else {
            return;
        };
        let (gt, le) = (usize::from(gt), usize::from(le));
        let from = if pkt.data().len() > usize::from(size) {
            self.stats.check_pkt_len_gt += 1;
            j + 1
        } else {
            self.stats.check_pkt_len_le += 1;
            j + 1 + gt
        };
        let n = if from == j + 1 { gt } else { le };
        // A list cut short (translation never makes one) runs what it has.
        let end = (from + n).min(actions.len());
        if let Some(branch) = actions.get(from..end) {
            self.run_list(pkt, meta, branch, base + from, run);
        }
    }

    /// `clone(...)` at `actions[j]`: its actions run on a copy of the
    /// packet (a spare buffer, reused), every output of it a copy; the
    /// packet itself is left as it was.
    #[cold]
    #[inline(never)]
    pub(super) fn clone_run(
        &mut self,
        pkt: &PacketBuf,
        meta: &PacketMeta,
        actions: &[DpAction],
        j: usize,
        base: usize,
        run: &mut Run,
    ) {
        let Some(&DpAction::Clone { len }) = actions.get(j) else {
            return;
        };
        let end = (j + 1 + usize::from(len)).min(actions.len());
        let Some(body) = actions.get(j + 1..end) else {
            return;
        };
        let mut buf = self.clone_bufs.pop().unwrap_or_default();
        if buf.load(pkt.data()).is_ok() {
            let mut m = *meta;
            let mut r = Run {
                key: run.key,
                slot: run.slot,
                tag: run.tag,
                // The buffer is reused: what it outputs is copied.
                copy_before: usize::MAX,
                trunc: None,
                delivered: false,
                ct_ran: run.ct_ran,
            };
            self.run_list(&mut buf, &mut m, body, base + j + 1, &mut r);
            run.delivered |= r.delivered;
        }
        self.clone_bufs.push(buf);
    }
}
