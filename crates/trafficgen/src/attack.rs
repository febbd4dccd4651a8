//! Attack workloads: `tse` (Tuple Space Explosion, Csikor et al., CoNEXT
//! 2019) and `storm` (a flood of new flows), each mixed with legitimate
//! established traffic so that what the legitimate flows keep can be
//! measured.
//!
//! Both start with one packet of each legitimate flow (the flows are
//! established before the attack begins), then interleave
//! deterministically: packet `j` after that is an attack packet iff
//! `floor((j+1)·s) > floor(j·s)` with `s` the attack share, so any stretch
//! of the capture has the share (±1 packet). Legitimate packets go round
//! robin over the legitimate flows.
//!
//! `tse`: the ACL of the paper's example — allow
//! `tcp,nw_src=10.0.0.0/8,nw_dst=10.1.2.3,tp_dst=80`, drop the rest —
//! with prefix tracking on the addresses and port-prefix tracking on
//! `tp_dst`, so a packet that differs from the allowed values first at bit
//! `b` of a field gets a megaflow that un-wildcards exactly `b+1` bits of
//! it. The attack packets walk every combination of (first differing bit
//! of `nw_src` in its /8 or none) × (of `nw_dst` or none) × (of `tp_dst`
//! or none), up to 9 × 33 × 17 − 1 = 5,048 shapes, each with its own
//! source port — a different megaflow mask per shape as far as the slow
//! path's staged lookup lets them differ. Legitimate flows are TCP from
//! `10.0.0.x` to `10.1.2.3:80`.
//!
//! `storm`: `--flows` established UDP flows (the `flows` profile's
//! addressing) and, at the attack share, packets each of a brand-new flow
//! (fresh source address and port from a seeded generator) — with
//! megaflows off, each is an upcall. Rules: those of `flows`.

use crate::frame::{stored_len, Frames, TcpSyn};
use crate::workload::Workload;
use crate::{check_count, ip, udp_rules, Error, Options, MAX_FLOWS, MAX_PACKETS};

/// Parameters shared by the attack profiles.
#[derive(Clone, Debug, PartialEq)]
pub struct AttackMix {
    /// Legitimate (established) flows, 1..=2^24.
    pub flows: u64,
    /// Share of packets that are attack packets, 0.0..=1.0.
    pub share: f64,
    /// Packets in all (default: `Options::min_packets` or 100,000,
    /// whichever is larger).
    pub packets: Option<u64>,
}

impl AttackMix {
    /// Whether packet `j` of the mix (counted after the warm-up of one
    /// packet per legitimate flow) is an attack packet.
    pub fn is_attack(&self, j: u64) -> bool {
        let s = self.share;
        ((j + 1) as f64 * s).floor() > (j as f64 * s).floor()
    }

    /// Whether packet `j` of the capture is an attack packet.
    pub fn is_attack_packet(&self, j: u64) -> bool {
        j >= self.flows && self.is_attack(j - self.flows)
    }

    fn check(&self, opts: &Options) -> Result<u64, Error> {
        check_count("--flows", self.flows, MAX_FLOWS)?;
        if !(0.0..=1.0).contains(&self.share) || self.share.is_nan() {
            return Err(Error::invalid(
                "--share",
                self.share * 100.0,
                "must be a percentage from 0 to 100",
            ));
        }
        let total = self
            .packets
            .or(opts.packets)
            .unwrap_or_else(|| opts.min_packets.max(100_000));
        check_count("--packets", total, MAX_PACKETS)?;
        Ok(total)
    }
}

/// The `tse` profile.
#[derive(Clone, Debug, PartialEq)]
pub struct TseSpec {
    /// The mix.
    pub mix: AttackMix,
}

/// The `storm` profile.
#[derive(Clone, Debug, PartialEq)]
pub struct StormSpec {
    /// The mix.
    pub mix: AttackMix,
}

/// The allowed destination of the `tse` ACL.
pub const TSE_DST: [u8; 4] = [10, 1, 2, 3];
/// The allowed destination port of the `tse` ACL.
pub const TSE_PORT: u16 = 80;

/// The `tse` rule set.
pub fn tse_rules() -> Vec<String> {
    vec![
        "priority=100,tcp,nw_src=10.0.0.0/8,nw_dst=10.1.2.3,tp_dst=80,actions=output:2".into(),
        "priority=0,actions=drop".into(),
    ]
}

/// Attack shape `n` (0-based) of the TSE walk: the first differing bit of
/// `nw_src` within its /8 (0..8, 8 = none), of `nw_dst` (0..32, 32 = none)
/// and of `tp_dst` (0..16, 16 = none); shape (8, 32, 16) — no difference —
/// is skipped.
pub fn tse_shape(n: u64) -> (u32, u32, u32) {
    let n = n % (9 * 33 * 17 - 1);
    let (s, rest) = ((n % 9) as u32, n / 9);
    let (d, p) = ((rest % 33) as u32, (rest / 33) as u32);
    (s, d, p)
}

/// The attack packet of shape `(s, d, p)` with source port `sport`: the
/// allowed values with bit `s` of the source's /8, bit `d` of the
/// destination and bit `p` of the port flipped (counted from the most
/// significant; the "none" values flip nothing), and the bits after each
/// flipped one varied by `salt` so packets of one shape are distinct flows.
pub fn tse_packet(shape: (u32, u32, u32), sport: u16, salt: u32) -> TcpSyn {
    let (s, d, p) = shape;
    let mut src = ip([10, 0, 0, 1]) ^ (salt & 0x00ff_ffff);
    if s < 8 {
        src ^= 0x8000_0000 >> s;
    }
    let mut dst = ip(TSE_DST);
    if d < 32 {
        dst ^= 0x8000_0000 >> d;
        // Bits after the first difference do not matter to the ACL.
        let below = (0x8000_0000u32 >> d).wrapping_sub(1);
        dst ^= salt.rotate_left(7) & below;
    }
    let mut dport = TSE_PORT;
    if p < 16 {
        dport ^= 0x8000 >> p;
    }
    TcpSyn {
        src,
        dst,
        sport,
        dport,
    }
}

/// A seeded 64-bit generator (splitmix64), for the storm's new flows.
struct Mix64(u64);

impl Mix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The packet sequence of a mix: legitimate packets round robin over the
/// first `mix.flows` frames, and for attack packet `a` (0, 1, ...) a new
/// frame that `push_attack(frames, a)` appends. Returns the sequence and
/// the number of attack packets.
fn interleave(
    mix: &AttackMix,
    total: u64,
    frames: &mut Frames,
    mut push_attack: impl FnMut(&mut Frames, u64),
) -> (Vec<u32>, u64) {
    let mut sequence = Vec::with_capacity(total as usize);
    let (mut legit, mut attack) = (0u64, 0u64);
    for j in 0..total {
        if mix.is_attack_packet(j) {
            push_attack(frames, attack);
            sequence.push((frames.len() - 1) as u32);
            attack += 1;
        } else {
            sequence.push((legit % mix.flows) as u32);
            legit += 1;
        }
    }
    (sequence, attack)
}

pub(crate) fn generate_tse(spec: &TseSpec, opts: &Options) -> Result<Workload, Error> {
    let total = spec.mix.check(opts)?;
    let n = spec.mix.flows;
    let mut frames = Frames::new(stored_len(opts.frame_size));
    for i in 0..n {
        frames.push_tcp_syn(&TcpSyn {
            src: ip([10, 0, 0, 0]).wrapping_add(1 + i as u32),
            dst: ip(TSE_DST),
            sport: 1024 + (i % 60_000) as u16,
            dport: TSE_PORT,
        });
    }
    let (sequence, attack) = interleave(&spec.mix, total, &mut frames, |frames, a| {
        let shape = tse_shape(a);
        let salt = (a / (9 * 33 * 17 - 1)) as u32 ^ opts.seed as u32;
        frames.push_tcp_syn(&tse_packet(shape, 1024 + (a % 60_000) as u16, salt));
    });
    let description = format!(
        "workload=tse flows={n} share={:.3} packets={total} attack_packets={attack} frame_size={}",
        spec.mix.share, opts.frame_size
    );
    Ok(Workload::new(
        frames,
        sequence,
        crate::DEFAULT_PPS,
        tse_rules(),
        description,
    ))
}

pub(crate) fn generate_storm(spec: &StormSpec, opts: &Options) -> Result<Workload, Error> {
    let total = spec.mix.check(opts)?;
    let n = spec.mix.flows;
    let mut frames = Frames::new(stored_len(opts.frame_size));
    for i in 0..n as u32 {
        frames.push_udp(&crate::flows::flow(i), opts.udp_checksum);
    }
    let mut rng = Mix64(opts.seed ^ 0x5707_3a11);
    let (sequence, attack) = interleave(&spec.mix, total, &mut frames, |frames, _| {
        let r = rng.next();
        // Sources outside the established flows' 10.0.0.0/8.
        let flow = crate::frame::UdpFlow {
            src: ip([11, 0, 0, 0]) | (r as u32 & 0x00ff_ffff),
            dst: ip([20, 0, 0, 0]).wrapping_add((r >> 24) as u32 % n as u32),
            sport: 1024 + ((r >> 48) as u16 % 60_000),
            dport: 5001,
        };
        frames.push_udp(&flow, opts.udp_checksum);
    });
    let description = format!(
        "workload=storm flows={n} share={:.3} packets={total} new_flows={attack} frame_size={}",
        spec.mix.share, opts.frame_size
    );
    Ok(Workload::new(
        frames,
        sequence,
        crate::DEFAULT_PPS,
        udp_rules(),
        description,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_holds_on_every_prefix() {
        for share in [0.0, 0.01, 0.1, 0.5, 1.0] {
            let m = AttackMix {
                flows: 10,
                share,
                packets: None,
            };
            let mut n = 0u64;
            for j in 0..10_000u64 {
                n += u64::from(m.is_attack(j));
                let want = ((j + 1) as f64 * share).floor() as u64;
                assert_eq!(n, want, "share {share} at {j}");
            }
        }
    }

    #[test]
    fn tse_shapes_cover_every_bit_and_differ_from_the_allowed_flow() {
        let mut seen = std::collections::HashSet::new();
        for n in 0..(9 * 33 * 17 - 1) {
            let sh = tse_shape(n);
            assert!(seen.insert(sh), "{sh:?} twice");
            assert_ne!(sh, (8, 32, 16));
            let p = tse_packet(sh, 1, 0);
            let allowed = p.src >> 24 == 10 && p.dst == ip(TSE_DST) && p.dport == TSE_PORT;
            assert!(!allowed, "{sh:?} is not an attack");
        }
        assert_eq!(seen.len(), 5048);
    }
}
