//! Scenarios: the default grid and the reproductions of the seeds' tables,
//! each a [`Plan`] of workloads and the configurations to run each under.
//!
//! | name | workloads | configurations | reproduces |
//! |---|---|---|---|
//! | `default` | flows-rr 1 / 1k / 100k / 1M, subtables 20×50000 | EMC only, EMC+SMC, EMC+DFC, EMC+CD, no caches | — (the quick overview) |
//! | `dfc` | flows-rr 8 … 500000 | `master` (OVS defaults: EMC, no SMC) vs `dfc` (DFC + EMC) | ovs-dev 2017, "dpif-netdev: Add datapath flow cache (DFC)" |
//! | `cd` | subtables S = 10/20/30 × 20k/100k/1M flows | `none` (EMC, no second level) vs `cd` (EMC + CD) | ovs-dev 2017, "Cuckoo Distributor" |
//! | `emc-prob` | flows-rr 1k … 1M | EMC insert probability 1/1 … 1/4000 and off; plus packets to fill the EMC | the conditional EMC insertion patch (`emc-insert-inv-prob`) |
//! | `nmap` | nmap 15 hosts × 65535 ports | megaflows on / off | the OVS-DPDK nmap/megaflow evaluation |
//! | `parity` | the OVS-DPDK anchor's main workloads | several configurations each (best is compared) | `tools/parity.sh` |
//! | `tse` | Tuple Space Explosion at 0 / 1 / 10 / 50 % of packets, 1000 established flows | OVS defaults, mask budget 8, SMC, SMC + mask budget | Csikor et al., CoNEXT 2019 (`tools/attack-bench.sh` adds OVS-DPDK) |
//! | `storm` | new-flow storm at 0 / 1 / 10 / 50 %, megaflows off | no budget, upcall budget 1 and 2 /ms/port | the upcall-storm weakness of inline upcalls |
//! | `ct` | flows-rr 1k / 100k / 1M through the conntrack tutorial firewall, with and without source NAT, and without conntrack | OVS defaults (EMC), EMC+SMC | conntrack against OVS-DPDK's (`tools/ct-bench.sh`) |

use crate::grid::{parse_configs, BenchConfig};
use crate::workload::{AttackKind, WorkloadSpec};
use flowpath_trafficgen::Order;
use std::fmt;
use std::str::FromStr;

/// A named set of runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// The quick default grid.
    Default,
    /// DFC vs OVS master.
    Dfc,
    /// Cuckoo Distributor vs none over subtables × flows.
    Cd,
    /// EMC insertion probability sweep.
    EmcProb,
    /// nmap scan, megaflows on/off.
    Nmap,
    /// The OVS-DPDK parity set.
    Parity,
    /// Tuple Space Explosion sweep, with and without defences.
    Tse,
    /// New-flow storm sweep, with and without the upcall budget.
    Storm,
    /// Connection tracking: established traffic through `ct`, with and
    /// without NAT.
    Ct,
    /// TRex's SFR profile (seed 001's second workload), megaflows on/off.
    Trex,
}

impl Scenario {
    /// All scenarios.
    pub const ALL: [Scenario; 10] = [
        Scenario::Default,
        Scenario::Dfc,
        Scenario::Cd,
        Scenario::EmcProb,
        Scenario::Nmap,
        Scenario::Parity,
        Scenario::Tse,
        Scenario::Storm,
        Scenario::Ct,
        Scenario::Trex,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Default => "default",
            Scenario::Dfc => "dfc",
            Scenario::Cd => "cd",
            Scenario::EmcProb => "emc-prob",
            Scenario::Nmap => "nmap",
            Scenario::Parity => "parity",
            Scenario::Tse => "tse",
            Scenario::Storm => "storm",
            Scenario::Ct => "ct",
            Scenario::Trex => "trex",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown scenario name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown scenario {0:?} (expected default, dfc, cd, emc-prob, nmap, parity, tse, storm, ct or trex)"
)]
pub struct UnknownScenario(pub String);

impl FromStr for Scenario {
    type Err = UnknownScenario;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scenario::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| UnknownScenario(s.to_string()))
    }
}

/// What to run: each workload with its configurations.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Title for tables and plots.
    pub title: String,
    /// The runs, workload by workload (each workload is loaded once).
    pub runs: Vec<(WorkloadSpec, Vec<BenchConfig>)>,
    /// Also measure how many packets fill the EMC (emc-prob scenario):
    /// (workload, target fraction, packet cap).
    pub emc_fill: Option<(WorkloadSpec, f64, u64)>,
}

impl Plan {
    /// Every workload under every configuration.
    pub fn grid(title: &str, workloads: Vec<WorkloadSpec>, configs: &[BenchConfig]) -> Plan {
        Plan {
            title: title.to_string(),
            runs: workloads
                .into_iter()
                .map(|w| (w, configs.to_vec()))
                .collect(),
            emc_fill: None,
        }
    }

    /// Number of (workload, configuration) runs.
    pub fn len(&self) -> usize {
        self.runs.iter().map(|(_, c)| c.len()).sum()
    }

    /// True when there is nothing to run.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn configs(list: &str) -> Vec<BenchConfig> {
    // The lists below are constants of this module, tested to parse.
    parse_configs(list).unwrap_or_default()
}

fn rr(n: u64) -> WorkloadSpec {
    WorkloadSpec::Flows {
        flows: n,
        order: Order::RoundRobin,
    }
}

/// The configurations of the default grid.
pub const DEFAULT_CONFIGS: &str = "emc,emc+smc,emc+dfc,emc+cd,none";

fn attack(kind: AttackKind) -> Vec<WorkloadSpec> {
    [0, 1, 10, 50]
        .into_iter()
        .map(|share_pct| WorkloadSpec::Attack { kind, share_pct })
        .collect()
}

/// The plan of `s`.
pub fn plan(s: Scenario) -> Plan {
    match s {
        Scenario::Tse => Plan::grid(
            "Tuple Space Explosion: attack share of packets vs defences",
            attack(AttackKind::Tse),
            &configs("ovs-default=emc,emc+mb:8,smc,smc+mb:8"),
        ),
        Scenario::Storm => Plan::grid(
            "New-flow storm (megaflows off): attack share vs upcall budget",
            attack(AttackKind::Storm),
            &configs("megaflows-off=emc+nomf,emc+nomf+ub:1,emc+nomf+ub:2"),
        ),
        Scenario::Ct => {
            let mut w = Vec::new();
            for n in [1000u64, 100_000, 1_000_000] {
                w.push(WorkloadSpec::Ct {
                    flows: n,
                    nat: false,
                });
                w.push(WorkloadSpec::Ct {
                    flows: n,
                    nat: true,
                });
                w.push(rr(n));
            }
            Plan::grid(
                "Connection tracking: established flows through ct, with and without NAT",
                w,
                &configs("emc,emc+smc"),
            )
        }
        Scenario::Default => Plan::grid(
            "flowpath bench: default grid",
            vec![
                rr(1),
                rr(1000),
                rr(100_000),
                rr(1_000_000),
                WorkloadSpec::Subtables {
                    subtables: 20,
                    dsts: 50_000,
                },
            ],
            &configs(DEFAULT_CONFIGS),
        ),
        Scenario::Dfc => Plan::grid(
            "DFC vs OVS master (EMC, no SMC), flows round robin",
            [8, 100, 1000, 10_000, 100_000, 200_000, 500_000]
                .into_iter()
                .map(rr)
                .collect(),
            &configs("master=emc,dfc=emc+dfc"),
        ),
        Scenario::Cd => {
            let mut w = Vec::new();
            for s in [10u64, 20, 30] {
                for total in [20_000u64, 100_000, 1_000_000] {
                    w.push(WorkloadSpec::Subtables {
                        subtables: s,
                        dsts: total / s,
                    });
                }
            }
            Plan::grid(
                "Cuckoo Distributor vs none (EMC default), S subtables x flows",
                w,
                &configs("none=emc,cd=emc+cd"),
            )
        }
        Scenario::EmcProb => {
            let mut p = Plan::grid(
                "EMC insertion probability 1/N (no second level), flows round robin",
                [1000, 10_000, 100_000, 1_000_000]
                    .into_iter()
                    .map(rr)
                    .collect(),
                &configs(
                    "1/1=emc:1,1/10=emc:10,1/100=emc:100,1/1000=emc:1000,1/4000=emc:4000,off=emc:0",
                ),
            );
            p.emc_fill = Some((rr(100_000), 0.9, 100_000_000));
            p
        }
        Scenario::Trex => Plan::grid(
            "TRex SFR (sfr_delay_10_1g, -m 1, 2 s of flow starts; c2s port 1, s2c port 11, NORMAL): megaflows on / off",
            vec![WorkloadSpec::Sfr {
                profile: crate::sfr::default_profile(),
                multiplier: 1.0,
                duration: 2.0,
            }],
            &configs("megaflows-on=emc,megaflows-off=emc+nomf"),
        ),
        Scenario::Nmap => Plan::grid(
            "nmap scan (15 hosts x 65535 ports): megaflows on / off",
            vec![WorkloadSpec::Nmap {
                hosts: 15,
                ports: 65535,
            }],
            &configs("megaflows-on=emc,megaflows-off=emc+nomf,on-emc-off=none,off-emc-off=nomf"),
        ),
        Scenario::Parity => {
            let flows = configs("emc,emc+smc,smc,emc+dfc,dfc,emc+cd,none");
            let mut runs: Vec<(WorkloadSpec, Vec<BenchConfig>)> = [1, 1000, 100_000, 1_000_000]
                .into_iter()
                .map(|n| (rr(n), flows.clone()))
                .collect();
            runs.push((
                WorkloadSpec::Subtables {
                    subtables: 20,
                    dsts: 50_000,
                },
                configs("emc,emc+smc,smc,emc+dfc,dfc,emc+cd,cd,none"),
            ));
            runs.push((
                WorkloadSpec::Nmap {
                    hosts: 15,
                    ports: 65535,
                },
                configs("emc,smc,dfc,none,emc+nomf,nomf,dfc+nomf"),
            ));
            Plan {
                title: "OVS-DPDK parity set".into(),
                runs,
                emc_fill: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_has_runs_and_valid_configs() {
        for s in Scenario::ALL {
            assert_eq!(s.name().parse::<Scenario>(), Ok(s));
            let p = plan(s);
            assert!(!p.is_empty(), "{s}");
            for (_, cs) in &p.runs {
                assert!(cs.len() >= 2, "{s}");
                for c in cs {
                    assert_eq!(c.dp.validate(), Ok(()));
                }
            }
        }
        assert_eq!(plan(Scenario::Default).len(), 25);
        assert_eq!(plan(Scenario::Cd).runs.len(), 9);
        assert_eq!(plan(Scenario::EmcProb).runs[0].1.len(), 6);
        assert!("x".parse::<Scenario>().is_err());
    }
}
