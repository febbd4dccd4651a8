//! Each cache and the dpcls against a linear scan of random megaflows with
//! random masks over random keys.

use flowpath_datapath::cd::Cd;
use flowpath_datapath::dfc::Dfc;
use flowpath_datapath::dpcls::Dpcls;
use flowpath_datapath::emc::Emc;
use flowpath_datapath::hash::packet_hash;
use flowpath_datapath::megaflow::{MegaflowRef, MegaflowTable};
use flowpath_datapath::smc::Smc;
use flowpath_datapath::BATCH_SIZE;
use flowpath_flow::{FlowKey, FlowMask};
use proptest::prelude::*;

/// Key words the strategies fill: the first line's, and extension words
/// (connection tracking, tunnel id, a Geneve option), which half of the
/// keys have (see `key_strategy`).
const WORDS: [usize; 8] = [0, 1, 2, 3, 8, 16, 24, 33];

/// A random mask over a few words, in_port always exact.
fn mask_strategy() -> impl Strategy<Value = FlowMask> {
    proptest::collection::vec(any::<u64>(), WORDS.len()).prop_map(|bits| {
        let mut m = FlowMask::catchall();
        for (w, b) in WORDS.iter().zip(bits) {
            // Sparse masks so that random keys match some megaflows.
            m.w[*w] = b & b.rotate_left(17) & 0x0f0f_00ff_0000_f00f;
        }
        m.w[0] |= 0xffff_ffff;
        m
    })
}

fn key_strategy() -> impl Strategy<Value = FlowKey> {
    proptest::collection::vec(any::<u64>(), WORDS.len()).prop_map(|bits| {
        let mut k = FlowKey::zero();
        // Half the keys have no extension words (a received packet's).
        let plain = bits[0] >> 63 == 1;
        for (w, b) in WORDS.iter().zip(bits) {
            // Low-entropy values: 2 bits per nibble group.
            k.w[*w] = b & 0x0303_0303_0303_0303;
        }
        if plain {
            k.w[flowpath_flow::key::W_CT_FIRST..].fill(0);
        }
        k.w[0] = (k.w[0] & !0xffff_ffff) | 1;
        k
    })
}

/// The EMC's `ext` bitmap of a one-key batch.
fn ext_of(k: &FlowKey) -> u32 {
    u32::from(
        k.w[flowpath_flow::key::W_CT_FIRST..]
            .iter()
            .any(|&w| w != 0),
    )
}

/// The megaflow table (which holds the dpcls of in_port 1, where every
/// key comes from) and the refs of its megaflows.
struct World {
    table: MegaflowTable,
    refs: Vec<MegaflowRef>,
}

impl World {
    fn cls(&self) -> Option<&Dpcls> {
        self.table.dpcls(1)
    }

    fn lookup_one(&self, key: &FlowKey) -> Option<(u32, u16)> {
        self.table.dpcls_lookup_one(1, key)
    }
}

fn build(masks: &[FlowMask], keys: &[FlowKey], picks: &[(usize, usize)]) -> World {
    let mut table = MegaflowTable::new();
    let mut refs = Vec::new();
    for &(m, k) in picks {
        let mask = &masks[m % masks.len()];
        let key = &keys[k % keys.len()];
        // A duplicate (same mask and masked key) installs nothing.
        if let Ok((r, _)) = table.insert(key, mask, vec![], 0) {
            refs.push(r);
        }
    }
    World { table, refs }
}

fn oracle(w: &World, key: &FlowKey) -> Vec<MegaflowRef> {
    w.refs
        .iter()
        .copied()
        .filter(|r| w.table.get(*r).is_some_and(|m| m.matches(key)))
        .collect()
}

fn batch_lookup(w: &mut World, keys: &[FlowKey]) -> Vec<Option<MegaflowRef>> {
    let mut out = Vec::new();
    for chunk in keys.chunks(BATCH_SIZE) {
        let mut idx = [0u32; BATCH_SIZE];
        let mut sub = [0u16; BATCH_SIZE];
        let mut lk = 0;
        let all = if chunk.len() == 32 {
            u32::MAX
        } else {
            (1 << chunk.len()) - 1
        };
        let f = match w.table.classifier_index(1) {
            Some(ci) => w
                .table
                .dpcls_lookup_batch(ci, chunk, all, &mut idx, &mut sub, &mut lk),
            None => 0,
        };
        for (i, x) in idx.iter().enumerate().take(chunk.len()) {
            out.push((f >> i & 1 == 1).then(|| w.table.live_at(*x).unwrap()));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn dpcls_returns_a_matching_megaflow_iff_one_exists(
        masks in proptest::collection::vec(mask_strategy(), 1..12),
        keys in proptest::collection::vec(key_strategy(), 1..64),
        picks in proptest::collection::vec((0usize..100, 0usize..100), 1..80),
        probe in proptest::collection::vec(key_strategy(), 1..100),
        removals in proptest::collection::vec(0usize..100, 0..30),
    ) {
        let mut w = build(&masks, &keys, &picks);
        let mut traffic = probe.clone();
        traffic.extend_from_slice(&keys);
        let got = batch_lookup(&mut w, &traffic);
        for (k, g) in traffic.iter().zip(&got) {
            let o = oracle(&w, k);
            match g {
                Some(r) => prop_assert!(o.contains(r), "returned a non-matching megaflow"),
                None => prop_assert!(o.is_empty(), "missed a matching megaflow"),
            }
            prop_assert_eq!(w.lookup_one(k).map(|x| x.0), g.map(|r| r.index));
        }
        // Remove some megaflows; nothing returns them afterwards.
        for i in removals {
            if w.refs.is_empty() { break; }
            let r = w.refs.swap_remove(i % w.refs.len());
            prop_assert!(w.table.remove(r));
            prop_assert!(!w.table.remove(r));
        }
        prop_assert_eq!(w.cls().map_or(0, |c| c.n_megaflows()), w.refs.len());
        prop_assert_eq!(w.table.len(), w.refs.len());
        for c in w.table.classifiers_mut() {
            c.rerank();
        }
        let got = batch_lookup(&mut w, &traffic);
        for (k, g) in traffic.iter().zip(&got) {
            let o = oracle(&w, k);
            match g {
                Some(r) => prop_assert!(o.contains(r)),
                None => prop_assert!(o.is_empty()),
            }
        }
    }

    #[test]
    fn dpcls_with_disjoint_megaflows_is_exactly_the_oracle(
        masks in proptest::collection::vec(mask_strategy(), 1..12),
        picks in proptest::collection::vec((0usize..100, any::<u16>()), 1..80),
        probe in proptest::collection::vec((0usize..100, key_strategy()), 1..100),
    ) {
        // Every mask covers word 7 fully and each megaflow has its own
        // value there: megaflows are disjoint.
        let masks: Vec<FlowMask> = masks.into_iter().map(|mut m| { m.w[7] = u64::MAX; m }).collect();
        let mut w = World { table: MegaflowTable::new(), refs: vec![] };
        let mut ids = Vec::new();
        for (n, &(m, bits)) in picks.iter().enumerate() {
            let mut key = FlowKey::zero();
            key.w[0] = 1;
            key.w[1] = u64::from(bits) * 0x0101_0001;
            key.w[7] = n as u64;
            let mask = &masks[m % masks.len()];
            let r = w.table.insert(&key, mask, vec![], 0).unwrap().0;
            w.refs.push(r);
            ids.push(key);
        }
        let traffic: Vec<FlowKey> = probe.iter().map(|(n, k)| {
            let mut k = *k;
            let src = &ids[n % ids.len()];
            k.w[7] = src.w[7];
            if n % 2 == 0 { k.w[1] = src.w[1]; }
            k
        }).collect();
        let got = batch_lookup(&mut w, &traffic);
        for (k, g) in traffic.iter().zip(&got) {
            let o = oracle(&w, k);
            prop_assert!(o.len() <= 1);
            prop_assert_eq!(g.as_ref(), o.first());
        }
    }

    #[test]
    fn caches_never_return_a_non_matching_or_dead_megaflow(
        masks in proptest::collection::vec(mask_strategy(), 1..8),
        keys in proptest::collection::vec(key_strategy(), 1..64),
        picks in proptest::collection::vec((0usize..100, 0usize..100), 1..60),
        traffic in proptest::collection::vec(0usize..1000, 50..400),
        removals in proptest::collection::vec(0usize..100, 1..10),
        log_size in 2u32..8,
    ) {
        let mut w = build(&masks, &keys, &picks);
        let size = 1usize << log_size;
        let mut emc = Emc::new(size, 2, 1, 5);
        let mut emc1 = Emc::new(size, 1, 1, 5);
        let mut smc = Smc::new(size * 4, 5);
        let mut dfc = Dfc::new(size);
        let mut cd = Cd::new(size / 4, 8, 1000, 5);
        let mut removed: Vec<MegaflowRef> = Vec::new();
        for (step, t) in traffic.iter().enumerate() {
            let k = &keys[t % keys.len()];
            let h = packet_hash(k);
            let hs = [h];
            let ks = std::slice::from_ref(k);
            let o = oracle(&w, k);
            let mut out = [MegaflowRef::NONE; BATCH_SIZE];
            for (name, f) in [
                ("emc", emc.lookup_batch(ks, &hs, 1, ext_of(k), &w.table, &mut out)),
                ("emc1", emc1.lookup_batch(ks, &hs, 1, ext_of(k), &w.table, &mut out)),
                ("smc", smc.lookup_batch(ks, &hs, 1, &w.table, &mut out)),
                ("dfc", dfc.lookup_batch(ks, &hs, 1, &w.table, &mut out)),
            ] {
                if f == 1 {
                    prop_assert!(o.contains(&out[0]), "{} returned a wrong megaflow", name);
                    prop_assert!(!removed.contains(&out[0]), "{} returned a removed megaflow", name);
                }
            }
            let mut sub = [0u16; BATCH_SIZE];
            if cd.lookup_batch(&hs, 1, &mut sub) == 1 {
                // A CD answer is only a hint: the directed lookup confirms.
                let mut idx = [0u32; BATCH_SIZE];
                let ci = w.table.classifier_index(1);
                if ci.is_some_and(|ci| w.table.dpcls_lookup_directed(ci, &sub, ks, 1, &mut idx) == 1) {
                    prop_assert!(o.iter().any(|r| r.index == idx[0]));
                }
            }
            if let Some((idx, s)) = w.lookup_one(k) {
                let r = w.table.live_at(idx).unwrap();
                emc.insert(k, h, r, &w.table);
                emc1.insert(k, h, r, &w.table);
                smc.insert(h, idx, &w.table);
                dfc.insert(h, idx);
                cd.insert(h, s);
                // Just inserted: found (no eviction between insert and lookup).
                prop_assert_eq!(emc.lookup_batch(ks, &hs, 1, ext_of(k), &w.table, &mut out), 1);
                prop_assert_eq!(out[0], r);
                prop_assert_eq!(smc.lookup_batch(ks, &hs, 1, &w.table, &mut out), 1);
                prop_assert_eq!(dfc.lookup_batch(ks, &hs, 1, &w.table, &mut out), 1);
                prop_assert_eq!(cd.lookup_batch(&hs, 1, &mut sub), 1);
                prop_assert_eq!(sub[0], s);
            }
            if step % 50 == 49 {
                if let Some(i) = removals.get(step / 50) {
                    if !w.refs.is_empty() {
                        let r = w.refs.swap_remove(i % w.refs.len());
                        prop_assert!(w.table.remove(r));
                        removed.push(r);
                    }
                }
            }
        }
        // Generation invalidation: after removing everything, every cache
        // misses every key.
        for r in std::mem::take(&mut w.refs) {
            prop_assert!(w.table.remove(r));
        }
        for k in &keys {
            let hs = [packet_hash(k)];
            let ks = std::slice::from_ref(k);
            let mut out = [MegaflowRef::NONE; BATCH_SIZE];
            prop_assert_eq!(emc.lookup_batch(ks, &hs, 1, ext_of(k), &w.table, &mut out), 0);
            prop_assert_eq!(emc1.lookup_batch(ks, &hs, 1, ext_of(k), &w.table, &mut out), 0);
            prop_assert_eq!(smc.lookup_batch(ks, &hs, 1, &w.table, &mut out), 0);
            prop_assert_eq!(dfc.lookup_batch(ks, &hs, 1, &w.table, &mut out), 0);
        }
        prop_assert_eq!(w.cls().map_or(0, |c| c.n_subtables()), 0, "empty subtables are removed");
    }
}
