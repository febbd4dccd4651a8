//! Shared test model: random rules over a few fields, a linear-scan
//! classifier (the oracle) and a mock slow path built on it.

#![allow(dead_code)]

use flowpath_datapath::{Upcall, UpcallError};
use flowpath_flow::{FlowKey, FlowMask};
use flowpath_odp::{DpAction, DpActions};
use proptest::prelude::*;

/// An OpenFlow-like rule: key under mask, priority, actions.
#[derive(Clone, Debug)]
pub struct Rule {
    pub key: FlowKey,
    pub mask: FlowMask,
    pub priority: u8,
    pub actions: DpActions,
}

/// The field values a key can take (small domains, so rules match and
/// traffic repeats).
pub fn key_strategy() -> impl Strategy<Value = FlowKey> {
    (
        1u32..3,
        prop_oneof![4 => Just(0x0800u16), 1 => Just(0x0806u16)],
        prop_oneof![Just(6u8), Just(17u8)],
        0u32..8,
        0u32..16,
        1u16..5,
        prop_oneof![Just(80u16), Just(443u16), Just(53u16)],
        prop_oneof![Just(0u16), Just(2u16), Just(16u16)],
        1u64..3,
    )
        .prop_map(|(port, dl_type, proto, src, dst, sp, dp, flags, mac)| {
            let mut k = FlowKey::zero();
            k.set_in_port(port);
            k.set_dl_type(dl_type);
            k.set_dl_dst(mac);
            k.set_nw_src(0x0a00_0000 | src);
            k.set_nw_dst(0x0a00_0000 | (dst >> 2) << 8 | (dst & 3));
            if dl_type == 0x0800 {
                k.set_nw_proto(proto);
                k.set_tp_src(sp);
                k.set_tp_dst(dp);
                if proto == 6 {
                    k.set_tcp_flags(flags);
                }
            }
            k
        })
}

fn field_mask(choice: u8, full: u64, partial: u64) -> u64 {
    match choice {
        0 | 1 => 0,
        2 => partial,
        _ => full,
    }
}

/// A rule: each of a few fields wildcarded, partially or fully matched,
/// with values taken from a random key so rules do match traffic.
pub fn rule_strategy() -> impl Strategy<Value = Rule> {
    (
        key_strategy(),
        proptest::collection::vec(0u8..4, 7),
        0u8..4,
        0u32..6,
        24u32..33,
    )
        .prop_map(|(k, choice, priority, out, plen)| {
            let mut m = FlowKey::zero();
            let prefix = if plen == 32 {
                u32::MAX
            } else {
                !(u32::MAX >> plen)
            };
            if choice[0] >= 2 {
                m.set_in_port(u32::MAX);
            }
            if choice[1] >= 2 || choice[3] >= 2 || choice[4] >= 2 || choice[5] >= 2 {
                m.set_dl_type(0xffff);
            }
            m.set_nw_src(field_mask(choice[2], u64::from(u32::MAX), u64::from(prefix)) as u32);
            if choice[3] >= 2 || choice[4] >= 2 || choice[5] >= 2 {
                m.set_nw_proto(0xff);
            }
            m.set_tp_dst(field_mask(choice[4], 0xffff, 0xff00) as u16);
            m.set_tp_src(field_mask(choice[5], 0xffff, 0xfffe) as u16);
            m.set_dl_dst(field_mask(choice[6], 0xffff_ffff_ffff, 0xffff_ffff_fffe));
            let mask = FlowMask::from_key(&m);
            let actions = if out == 0 {
                vec![]
            } else {
                vec![DpAction::Output(out)]
            };
            Rule {
                key: k.masked(&mask),
                mask,
                priority,
                actions,
            }
        })
}

/// Highest-priority matching rule (ties: lowest index).
pub fn winner(rules: &[Rule], key: &FlowKey) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, r) in rules.iter().enumerate() {
        if key.eq_masked(&r.key, &r.mask) && best.is_none_or(|b| rules[b].priority < r.priority) {
            best = Some(i);
        }
    }
    best
}

/// The oracle's actions for `key` (no match: drop).
pub fn oracle(rules: &[Rule], key: &FlowKey) -> DpActions {
    winner(rules, key).map_or_else(Vec::new, |i| rules[i].actions.clone())
}

/// How the mock slow path computes megaflow masks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaskMode {
    /// OR of every rule's mask (one subtable per port).
    AllRules,
    /// OR of the masks of rules with priority ≥ the winner's (all rules if
    /// none matches): still a correct megaflow, and gives several masks.
    AtLeastWinner,
}

/// A slow path over `rules`; keys with `tp_src == fail_tp_src` fail,
/// with `tp_src == lost_tp_src` are lost.
pub struct MockUpcall {
    pub rules: Vec<Rule>,
    pub mode: MaskMode,
    pub fail_tp_src: Option<u16>,
    pub lost_tp_src: Option<u16>,
    pub calls: u64,
}

impl MockUpcall {
    pub fn new(rules: Vec<Rule>, mode: MaskMode) -> Self {
        MockUpcall {
            rules,
            mode,
            fail_tp_src: None,
            lost_tp_src: None,
            calls: 0,
        }
    }
}

impl Upcall for MockUpcall {
    fn upcall(&mut self, key: &FlowKey) -> Result<(DpActions, FlowMask), UpcallError> {
        self.calls += 1;
        if Some(key.tp_src()) == self.fail_tp_src {
            return Err(UpcallError::Failed);
        }
        if Some(key.tp_src()) == self.lost_tp_src {
            return Err(UpcallError::Lost);
        }
        let w = winner(&self.rules, key);
        let min_prio = match (self.mode, w) {
            (MaskMode::AtLeastWinner, Some(i)) => self.rules[i].priority,
            _ => 0,
        };
        let mut mask = FlowMask::catchall();
        for r in self.rules.iter().filter(|r| r.priority >= min_prio) {
            mask.or_assign(&r.mask);
        }
        Ok((
            w.map_or_else(Vec::new, |i| self.rules[i].actions.clone()),
            mask,
        ))
    }
}
