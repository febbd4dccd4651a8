//! A cache tier from outside the crate plugs into the cascade through
//! [`CacheTier`] and `Datapath::push_tier`, with no change to the
//! pipeline: a counting pass-through sees exactly the packets the EMC
//! missed, and a one-entry cache answers repeats of the last megaflow it
//! was given; the packets' actions are those of the same datapath without
//! them, and each tier's hits are counted under its own name.

use flowpath_datapath::megaflow::MegaflowTable;
use flowpath_datapath::tier::Probe;
use flowpath_datapath::{
    Batch, CacheTier, Config, Datapath, MegaflowRef, SecondLevel, Tier, TierKind, UpcallError,
    Verdict, BATCH_SIZE,
};
use flowpath_flow::{FlowKey, FlowMask};
use flowpath_odp::{DpAction, DpActions};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Sees every lookup, answers none.
#[derive(Debug, Default)]
struct Counting {
    looked_up: Arc<AtomicU64>,
    inserted: Arc<AtomicU64>,
}

impl CacheTier for Counting {
    fn kind(&self) -> TierKind {
        TierKind::Other
    }
    fn name(&self) -> &'static str {
        "counting"
    }
    fn lookup_batch(&mut self, _: &Probe<'_>, todo: u32, _: &mut [MegaflowRef; BATCH_SIZE]) -> u32 {
        self.looked_up
            .fetch_add(u64::from(todo.count_ones()), Ordering::Relaxed);
        0
    }
    fn insert(&mut self, _: &FlowKey, _: u32, _: MegaflowRef, _: u16, _: &MegaflowTable) {
        self.inserted.fetch_add(1, Ordering::Relaxed);
    }
    fn clear(&mut self) {}
    fn memory_bytes(&self) -> usize {
        0
    }
}

/// Remembers the last megaflow it was given and answers packets it
/// covers.
#[derive(Debug, Default)]
struct LastFlow {
    last: Option<MegaflowRef>,
}

impl CacheTier for LastFlow {
    fn kind(&self) -> TierKind {
        TierKind::Other
    }
    fn name(&self) -> &'static str {
        "last-flow"
    }
    fn lookup_batch(
        &mut self,
        p: &Probe<'_>,
        todo: u32,
        out: &mut [MegaflowRef; BATCH_SIZE],
    ) -> u32 {
        let Some(r) = self.last else { return 0 };
        let mut hits = 0;
        let mut m = todo;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if p.flows.get(r).is_some_and(|mf| mf.matches(&p.keys[i])) {
                out[i] = r;
                hits |= 1 << i;
            }
        }
        hits
    }
    fn insert(&mut self, _: &FlowKey, _: u32, flow: MegaflowRef, _: u16, _: &MegaflowTable) {
        self.last = Some(flow);
    }
    fn clear(&mut self) {
        self.last = None;
    }
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

fn udp(port: u32, dst: u16) -> FlowKey {
    let mut k = FlowKey::zero();
    k.set_in_port(port);
    k.set_dl_type(0x0800);
    k.set_nw_proto(17);
    k.set_tp_dst(dst);
    k
}

/// The slow path: UDP port 53 to port 2, the rest to port 3; the
/// decision depends on tp_dst.
fn slow(key: &FlowKey) -> Result<(DpActions, FlowMask), UpcallError> {
    let mut m = FlowKey::zero();
    m.set_tp_dst(0xffff);
    let out = if key.tp_dst() == 53 { 2 } else { 3 };
    Ok((vec![DpAction::Output(out)], FlowMask::from_key(&m)))
}

/// Runs `traffic` in batches of 8; returns each packet's actions and tier.
fn run(dp: &mut Datapath, traffic: &[FlowKey]) -> Vec<(DpActions, Option<Tier>)> {
    let mut up = slow;
    let mut out = Vec::new();
    let mut b = Batch::new();
    for (n, chunk) in traffic.chunks(8).enumerate() {
        b.clear();
        for k in chunk {
            b.push(*k, 64).unwrap();
        }
        dp.process_batch(&mut b, n as u64, &mut up);
        for i in 0..chunk.len() {
            let tier = match b.verdicts()[i] {
                Verdict::Megaflow { tier, .. } => Some(tier),
                _ => None,
            };
            out.push((b.actions(i, dp).to_vec(), tier));
        }
    }
    out
}

#[test]
fn a_tier_from_outside_plugs_in_without_changing_results() {
    let traffic: Vec<FlowKey> = (0..200u16)
        .map(|i| udp(1, [53, 80, 53, 443][usize::from(i % 4)]))
        .collect();
    let cfg = Config {
        second_level: SecondLevel::None,
        emc_insert_inv_prob: 1,
        ..Config::default()
    };
    // Without the tiers: the reference.
    let mut plain = Datapath::new(cfg.clone()).unwrap();
    let want = run(&mut plain, &traffic);

    let counting = Counting::default();
    let (looked_up, inserted) = (counting.looked_up.clone(), counting.inserted.clone());
    let mut dp = Datapath::new(cfg.clone()).unwrap();
    dp.push_tier(Box::new(counting));
    let got = run(&mut dp, &traffic);
    let acts = |v: &[(DpActions, Option<Tier>)]| v.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    assert_eq!(acts(&got), acts(&want), "actions unchanged");
    let s = *dp.stats();
    // The pass-through saw exactly the packets the EMC missed, and was
    // given every megaflow the dpcls found or the slow path installed.
    assert_eq!(
        looked_up.load(Ordering::Relaxed),
        s.packets_received - s.emc_hits
    );
    assert!(s.emc_hits > 0, "{s:?}");
    assert_eq!(
        inserted.load(Ordering::Relaxed),
        s.megaflow_hits + s.miss_with_success_upcall
    );
    assert_eq!(s.other_hits, 0);
    assert_eq!(dp.tiers().len(), 1);
    assert_eq!(dp.tiers()[0].name(), "counting");

    // With the EMC off, the one-entry tier answers the repeats of the last
    // megaflow: its hits are its own.
    let mut dp = Datapath::new(Config {
        emc_enable: false,
        ..cfg.clone()
    })
    .unwrap();
    dp.push_tier(Box::new(LastFlow::default()));
    let same: Vec<FlowKey> = (0..64).map(|_| udp(1, 53)).collect();
    let got = run(&mut dp, &same);
    assert!(got.iter().all(|(a, _)| a == &vec![DpAction::Output(2)]));
    let s = *dp.stats();
    // The first batch: one upcall, then the dpcls finds the new megaflow
    // for the other seven; every later batch: the tier.
    assert_eq!(s.miss_with_success_upcall, 1);
    assert_eq!(s.megaflow_hits, 7);
    assert_eq!(s.other_hits, 56, "{s:?}");
    assert_eq!(s.decided(), 64);
    assert!(got[8..].iter().all(|(_, t)| *t == Some(Tier::Other)));
    assert_eq!(dp.tiers()[0].name(), "last-flow");
    assert!(dp.report().to_string().contains("other tiers' hits: 56"));
    // A removed megaflow is not answered any more (the tier checks it).
    let r = dp.megaflows().live_refs().next().unwrap();
    assert!(dp.remove_megaflow(r));
    let again = run(&mut dp, &same[..8]);
    assert_eq!(again[0].1, Some(Tier::Upcall));
    // Tiers pushed stay across a change of the configured second level.
    dp.set_config(Config {
        emc_enable: false,
        second_level: SecondLevel::Smc,
        ..cfg
    })
    .unwrap();
    let names: Vec<&str> = dp.tiers().iter().map(|t| t.name()).collect();
    assert_eq!(names, ["smc", "last-flow"]);
}
