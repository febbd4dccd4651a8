//! The datapath options shared by `flowpath run` and `flowpath switch`.
//!
//! Every configuration key of the datapath ([`flowpath_datapath::keys`])
//! is a flag here, generated from the key table: `--NAME VALUE`, or for a
//! key that is on by default, the flag that turns it off (`--no-emc`,
//! `--no-megaflows`). Help texts and defaults come from the same table,
//! so the flags, the switch's `config/set` and the benchmark's tokens
//! accept the same keys.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use flowpath_datapath::keys::{self, KeyKind, KEYS};
use flowpath_datapath::{Config, SecondLevel};

/// Datapath options: the keys given on the command line, in table order.
#[derive(Clone, Debug, Default)]
pub struct DatapathArgs {
    set: Vec<(&'static str, String)>,
    no_huge_pages: bool,
}

const NO_HUGE_PAGES: &str = "no-huge-pages";

impl Args for DatapathArgs {
    fn augment_args(mut cmd: Command) -> Command {
        for k in KEYS {
            let arg = match k.off_flag {
                Some(off) => Arg::new(k.name)
                    .long(off)
                    .action(ArgAction::SetTrue)
                    .help(format!(
                        "{} This flag turns it off ({}=false).",
                        k.help, k.name
                    )),
                None => {
                    let a = Arg::new(k.name)
                        .long(k.name)
                        .value_name(k.kind.placeholder())
                        .help(format!("{} [default: {}]", k.help, k.default_value()));
                    match k.kind {
                        KeyKind::Cache => {
                            a.value_parser(SecondLevel::ALL.map(|l| l.name()).to_vec())
                        }
                        _ => a.value_parser(clap::value_parser!(u64)),
                    }
                }
            };
            cmd = cmd.arg(arg);
        }
        cmd.arg(
            Arg::new(NO_HUGE_PAGES)
                .long(NO_HUGE_PAGES)
                .action(ArgAction::SetTrue)
                .help(
                    "Allocate the large tables (EMC, SMC, DFC, CD, hybrid, the megaflow \
                     slab and the dpcls indexes) on ordinary 4 KB pages instead of \
                     advising 2 MB transparent huge pages.",
                ),
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for DatapathArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut a = DatapathArgs::default();
        a.update_from_arg_matches(m)?;
        Ok(a)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        for k in KEYS {
            let value = if k.off_flag.is_some() {
                m.get_flag(k.name).then(|| "false".to_string())
            } else if k.kind == KeyKind::Cache {
                m.get_one::<String>(k.name).cloned()
            } else {
                m.get_one::<u64>(k.name).map(u64::to_string)
            };
            if let Some(v) = value {
                self.set.retain(|(n, _)| *n != k.name);
                self.set.push((k.name, v));
            }
        }
        self.no_huge_pages |= m.get_flag(NO_HUGE_PAGES);
        Ok(())
    }
}

impl DatapathArgs {
    /// Applies the process-wide settings (page size of the cache tables);
    /// call before building datapaths.
    pub fn apply_process_settings(&self) {
        flowpath_datapath::hugepage::set_enabled(!self.no_huge_pages);
    }

    /// The datapath configuration these options give: the keys' defaults
    /// with the flags given applied, checked as a whole.
    pub fn config(&self) -> anyhow::Result<Config> {
        let mut cfg = keys::defaults();
        for (k, v) in &self.set {
            keys::set(&mut cfg, k, v).map_err(|e| anyhow::anyhow!("--{e}"))?;
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        dp: DatapathArgs,
    }

    #[test]
    fn every_key_is_a_flag() {
        let mut argv = vec!["flowpath".to_string()];
        for k in KEYS {
            match k.off_flag {
                Some(off) => argv.push(format!("--{off}")),
                None if k.kind == KeyKind::Cache => {
                    argv.extend([format!("--{}", k.name), "hybrid".into()])
                }
                // A power of two every size key accepts, 8 for cd-ways.
                None => argv.extend([format!("--{}", k.name), "8".into()]),
            }
        }
        let cli = Cli::try_parse_from(&argv).unwrap();
        let cfg = cli.dp.config().unwrap();
        for k in KEYS {
            assert_ne!(k.get(&cfg), k.default_value(), "--{} had no effect", k.name);
        }
        let none = Cli::try_parse_from(["flowpath"]).unwrap();
        assert_eq!(none.dp.config().unwrap(), keys::defaults());
    }

    #[test]
    fn bad_values_are_refused_naming_the_flag() {
        assert!(Cli::try_parse_from(["flowpath", "--second-level", "fast"]).is_err());
        assert!(Cli::try_parse_from(["flowpath", "--flow-limit", "x"]).is_err());
        let c = Cli::try_parse_from(["flowpath", "--upcall-budget", "5000000000"]).unwrap();
        let e = c.dp.config().unwrap_err().to_string();
        assert!(e.contains("--upcall-budget=5000000000"), "{e}");
        let c = Cli::try_parse_from(["flowpath", "--emc-entries", "100"]).unwrap();
        let e = c.dp.config().unwrap_err().to_string();
        assert!(e.contains("emc_entries"), "{e}");
    }
}
