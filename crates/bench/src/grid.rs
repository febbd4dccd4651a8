//! The configuration grid: named datapath configurations to compare.
//!
//! A configuration is written as the tiers it has, joined by `+`, with an
//! optional `LABEL=` in front:
//!
//! | token | meaning |
//! |---|---|
//! | `emc` | EMC on, OVS's default insertion probability 1/100 |
//! | `emc:N` | EMC with `emc-insert-inv-prob` N (`emc:1` = always insert, `emc:0` = EMC off, as OVS, which then skips the lookup too) |
//! | `smc`, `dfc`, `cd`, `hybrid` | that second-level cache |
//! | `auto` | EMC and hybrid table, each switched on or off by measurement (implies `emc`) |
//! | `dfc-proposal` | the DFC patch's set-up: DFC plus a 1-way, 16K-entry EMC |
//! | `nomf` | megaflows off (`upcall/disable-megaflows`: exact-match megaflows) |
//! | `ub:N` | upcall budget: N upcalls per input port per ms (storm defence) |
//! | `mb:N` | mask budget: N subtables per input port (TSE defence) |
//! | `none` | nothing (alone: no caches, every packet searches the dpcls) |
//! | `KEY:VALUE` | any configuration key of [`flowpath_datapath::keys`] (`flow-limit:5000`, `emc-entries:1024`, `megaflows:false`) |
//!
//! Tiers not named are off: `emc` alone is OVS's default (EMC, no SMC),
//! `smc` alone is "SMC on, EMC off". So `emc+smc` = OVS with
//! `smc-enable=true`. Examples: `emc`, `emc+dfc`, `master=emc`,
//! `megaflows-off=emc+nomf`, `emc:1000`.
//!
//! [`cross_product`] builds a grid from lists of EMC probabilities, second
//! levels and megaflow switches instead.

use flowpath_datapath::{keys, Config, SecondLevel};
use std::fmt;

/// One configuration of the grid: a label and the datapath config.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchConfig {
    /// Column name in tables and the `config` key of results.
    pub label: String,
    /// The datapath configuration.
    pub dp: Config,
}

/// A configuration string that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad configuration {spec:?}: {reason}")]
pub struct GridError {
    /// The offending text.
    pub spec: String,
    /// What is wrong.
    pub reason: String,
}

fn err(spec: &str, reason: impl Into<String>) -> GridError {
    GridError {
        spec: spec.to_string(),
        reason: reason.into(),
    }
}

/// The base every spec starts from: no caches, megaflows on, OVS sizes.
fn base() -> Config {
    Config {
        emc_enable: false,
        second_level: SecondLevel::None,
        ..Config::default()
    }
}

/// Parses one configuration (see the module documentation).
pub fn parse_config(spec: &str) -> Result<BenchConfig, GridError> {
    let spec = spec.trim();
    let (label, body) = match spec.split_once('=') {
        Some((l, b)) if !l.is_empty() => (l.to_string(), b),
        Some(_) => return Err(err(spec, "empty label before '='")),
        None => (spec.to_string(), spec),
    };
    if body.is_empty() {
        return Err(err(spec, "empty configuration"));
    }
    let mut cfg = base();
    let mut second: Option<SecondLevel> = None;
    let mut set_second = |l: SecondLevel, cfg: &mut Config| -> Result<(), GridError> {
        if second.is_some_and(|s| s != l) {
            return Err(err(spec, "more than one second-level cache"));
        }
        second = Some(l);
        cfg.second_level = l;
        Ok(())
    };
    for tok in body.split('+') {
        match tok {
            "emc" => {
                cfg.emc_enable = true;
                cfg.emc_insert_inv_prob = 100;
            }
            "auto" => {
                // The whole cascade is measured: the EMC is one of the
                // tiers auto switches.
                cfg.emc_enable = true;
                cfg.emc_insert_inv_prob = 100;
                set_second(SecondLevel::Auto, &mut cfg)?
            }
            "nomf" => cfg.megaflows = false,
            "dfc-proposal" => {
                let p = Config::dfc_proposal();
                cfg.emc_enable = true;
                cfg.emc_entries = p.emc_entries;
                cfg.emc_ways = p.emc_ways;
                set_second(SecondLevel::Dfc, &mut cfg)?;
            }
            t if t.starts_with("ub:") || t.starts_with("mb:") => {
                let n: u32 = t[3..]
                    .parse()
                    .map_err(|_| err(spec, format!("{t:?}: N must be a number")))?;
                if t.starts_with("ub:") {
                    cfg.upcall_budget_per_ms = n;
                } else {
                    cfg.mask_budget = n as usize;
                }
            }
            t => {
                // A second-level cache by its name (smc, dfc, cd, hybrid,
                // none).
                if let Ok(l) = t.parse::<SecondLevel>() {
                    set_second(l, &mut cfg)?;
                    continue;
                }
                let Some(n) = t.strip_prefix("emc:") else {
                    // Any configuration key as KEY:VALUE.
                    if let Some((k, v)) = t.split_once(':') {
                        if let Some(key) = keys::key(k) {
                            key.set(&mut cfg, v).map_err(|e| err(spec, e.to_string()))?;
                            if key.name == "second-level" {
                                set_second(cfg.second_level, &mut cfg)?;
                            }
                            continue;
                        }
                    }
                    return Err(err(
                        spec,
                        format!(
                            "unknown token {t:?} (expected emc, emc:N, a second-level cache \
                             ({}), dfc-proposal, nomf, ub:N, mb:N or KEY:VALUE with a \
                             configuration key: {})",
                            keys::cache_names(),
                            keys::key_names().join(", ")
                        ),
                    ));
                };
                let n: u32 = n
                    .parse()
                    .map_err(|_| err(spec, format!("{t:?}: N must be a number")))?;
                cfg.emc_enable = n != 0;
                cfg.emc_insert_inv_prob = n;
            }
        }
    }
    Ok(BenchConfig { label, dp: cfg })
}

/// Parses a comma-separated list of configurations.
pub fn parse_configs(list: &str) -> Result<Vec<BenchConfig>, GridError> {
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_config)
        .collect()
}

/// A short canonical name for `cfg` in the token syntax (what
/// [`cross_product`] labels its configurations with).
pub fn canonical_label(cfg: &Config) -> String {
    let mut parts: Vec<String> = Vec::new();
    if cfg.second_level == SecondLevel::Auto {
        // auto implies the EMC (one of the tiers it switches).
    } else if cfg.emc_enable && cfg.emc_insert_inv_prob != 0 {
        if cfg.emc_insert_inv_prob == 100 {
            parts.push("emc".into());
        } else {
            parts.push(format!("emc:{}", cfg.emc_insert_inv_prob));
        }
    }
    if cfg.second_level != SecondLevel::None {
        parts.push(cfg.second_level.name().into());
    }
    if !cfg.megaflows {
        parts.push("nomf".into());
    }
    if cfg.upcall_budget_per_ms > 0 {
        parts.push(format!("ub:{}", cfg.upcall_budget_per_ms));
    }
    if cfg.mask_budget > 0 {
        parts.push(format!("mb:{}", cfg.mask_budget));
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join("+")
    }
}

/// The grid of every combination of `emc_inv_probs` (0 = EMC off),
/// `seconds` and `megaflows`, labelled canonically.
pub fn cross_product(
    emc_inv_probs: &[u32],
    seconds: &[SecondLevel],
    megaflows: &[bool],
) -> Vec<BenchConfig> {
    let mut out = Vec::new();
    for &p in emc_inv_probs {
        for &s in seconds {
            for &m in megaflows {
                let dp = Config {
                    emc_enable: p != 0,
                    emc_insert_inv_prob: p,
                    second_level: s,
                    megaflows: m,
                    ..base()
                };
                out.push(BenchConfig {
                    label: canonical_label(&dp),
                    dp,
                });
            }
        }
    }
    out
}

impl fmt::Display for BenchConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        let c = parse_config("emc").unwrap();
        assert!(c.dp.emc_enable);
        assert_eq!(c.dp.emc_insert_inv_prob, 100);
        assert_eq!(c.dp.second_level, SecondLevel::None);
        assert!(c.dp.megaflows);
        assert_eq!(c.label, "emc");

        let c = parse_config("emc+smc").unwrap();
        assert_eq!(c.dp.second_level, SecondLevel::Smc);
        let c = parse_config("smc").unwrap();
        assert!(!c.dp.emc_enable);
        let c = parse_config("none").unwrap();
        assert!(!c.dp.emc_enable && c.dp.second_level == SecondLevel::None);
        let c = parse_config("emc:0+cd").unwrap();
        assert!(!c.dp.emc_enable);
        assert_eq!(c.dp.second_level, SecondLevel::Cd);
        let c = parse_config("emc:4000").unwrap();
        assert_eq!(c.dp.emc_insert_inv_prob, 4000);
        let c = parse_config("megaflows-off=emc+nomf").unwrap();
        assert_eq!(c.label, "megaflows-off");
        assert!(!c.dp.megaflows && c.dp.emc_enable);
        let c = parse_config("dfc-proposal").unwrap();
        assert_eq!((c.dp.emc_entries, c.dp.emc_ways), (1 << 14, 1));
        assert_eq!(c.dp.second_level, SecondLevel::Dfc);
        for c in [
            "emc",
            "emc+smc",
            "smc",
            "none",
            "emc:1000+dfc",
            "cd+nomf",
            "emc+cd",
        ] {
            let p = parse_config(c).unwrap();
            assert_eq!(canonical_label(&p.dp), c);
            assert_eq!(p.dp.validate(), Ok(()));
        }
    }

    #[test]
    fn errors() {
        assert!(parse_config("emc+smc+dfc").is_err());
        assert!(parse_config("emx").is_err());
        assert!(parse_config("emc:x").is_err());
        assert!(parse_config("colour:blue").is_err());
        assert!(parse_config("flow-limit:x").is_err());
        assert!(parse_config("=emc").is_err());
        assert!(parse_config("x=").is_err());
        assert!(parse_config("").is_err());
    }

    #[test]
    fn lists_and_cross_product() {
        let l = parse_configs("emc, emc+smc,none,").unwrap();
        let labels: Vec<&str> = l.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["emc", "emc+smc", "none"]);
        let g = cross_product(
            &[0, 100],
            &[SecondLevel::None, SecondLevel::Smc],
            &[true, false],
        );
        assert_eq!(g.len(), 8);
        let labels: Vec<String> = g.iter().map(|c| c.label.clone()).collect();
        assert_eq!(labels[0], "none");
        assert_eq!(labels[1], "nomf");
        assert_eq!(labels[2], "smc");
        assert_eq!(labels[4], "emc");
        assert_eq!(labels[7], "emc+smc+nomf");
    }

    #[test]
    fn every_configuration_key_is_a_token() {
        for k in keys::KEYS {
            let v = match k.kind {
                keys::KeyKind::Bool => (k.default_value() != "true").to_string(),
                keys::KeyKind::Cache => "hybrid".to_string(),
                _ => "8".to_string(),
            };
            let c = parse_config(&format!("emc+{}:{v}", k.name))
                .unwrap_or_else(|e| panic!("{}: {e}", k.name));
            assert_eq!(k.get(&c.dp), v, "{}", k.name);
        }
        let e = parse_config("emc+flow-limit:x").unwrap_err().to_string();
        assert!(
            e.contains("flow-limit=x: expected a non-negative number"),
            "{e}"
        );
        assert!(
            parse_config("smc+second-level:dfc").is_err(),
            "two second levels"
        );
    }
}
