//! The configuration keys: every knob of a datapath worker, declared once.
//!
//! What: [`KEYS`] lists each key with its name (OVS's `other_config` name
//! where OVS has the knob), the kind of value, its help text, the command
//! line flag it gets, and how it reads and writes a [`Config`]. Everything
//! that names a key goes through this table: the command-line flags of
//! `flowpath run` and `flowpath switch` (generated from it), the switch's
//! `config/set` and `config/show`, the benchmark's `KEY:VALUE` tokens, and
//! the documentation's table (a test checks it names every key).
//! [`defaults`] is the configuration those commands start from.
//!
//! Why one table: a key added here is settable everywhere at once, and no
//! two places can disagree on its name, its default or its syntax.
//!
//! Invariants: names are unique; [`set`] either changes exactly its key's
//! field or returns an error naming the key and the value; every value
//! [`show`] prints, [`set`] accepts back.
//!
//! Threads: plain data.

use crate::config::{Config, SecondLevel};

/// The kind of a key's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// `true` or `false` (also `on`/`off`, `1`/`0`).
    Bool,
    /// A non-negative integer.
    Number,
    /// Milliseconds.
    Millis,
    /// A second-level cache name ([`SecondLevel::ALL`]).
    Cache,
}

impl KeyKind {
    /// The placeholder shown in help texts.
    pub fn placeholder(self) -> &'static str {
        match self {
            KeyKind::Bool => "BOOL",
            KeyKind::Number => "N",
            KeyKind::Millis => "MS",
            KeyKind::Cache => "CACHE",
        }
    }
}

/// Where a change of the key takes effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applies {
    /// Between two batches of each worker, without losing megaflows
    /// (counters and limits).
    Live,
    /// Between two batches; the tier whose size or kind changed starts
    /// empty (its entries are only a cache: megaflows stay).
    RebuildsTier,
}

/// One configuration key. See the module documentation.
pub struct ConfigKey {
    /// The key's name (`config/set NAME=VALUE`, `--NAME VALUE`,
    /// bench token `NAME:VALUE`).
    pub name: &'static str,
    /// The kind of value.
    pub kind: KeyKind,
    /// What it does, for help texts and docs.
    pub help: &'static str,
    /// Where a change takes effect.
    pub applies: Applies,
    /// For a key that is on by default: the command-line flag that turns
    /// it off (`--no-emc`); such keys have no `--NAME VALUE` flag.
    pub off_flag: Option<&'static str>,
    /// The largest number a [`KeyKind::Number`] or [`KeyKind::Millis`]
    /// key's field holds.
    max: u64,
    get: fn(&Config) -> Value,
    put: fn(&mut Config, Value),
}

/// A key's value, of its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// A [`KeyKind::Bool`] key's.
    Bool(bool),
    /// A [`KeyKind::Number`] or [`KeyKind::Millis`] key's.
    Number(u64),
    /// A [`KeyKind::Cache`] key's.
    Cache(SecondLevel),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Number(n) => write!(f, "{n}"),
            Value::Cache(l) => f.write_str(l.name()),
        }
    }
}

impl std::fmt::Debug for ConfigKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigKey")
            .field("name", &self.name)
            .finish()
    }
}

impl ConfigKey {
    /// The key's value in `cfg`.
    pub fn value(&self, cfg: &Config) -> Value {
        (self.get)(cfg)
    }

    /// The key's value in `cfg`, as [`show`] prints it.
    pub fn get(&self, cfg: &Config) -> String {
        self.value(cfg).to_string()
    }

    /// The key's default (its value in [`defaults`]).
    pub fn default_value(&self) -> String {
        self.get(&defaults())
    }

    /// Sets the key in `cfg` from its text `value`.
    pub fn set(&self, cfg: &mut Config, value: &str) -> Result<(), KeyError> {
        let bad = |expected: &str| KeyError::BadValue {
            key: self.name.to_string(),
            value: value.to_string(),
            expected: expected.to_string(),
        };
        let v = value.trim();
        let parsed = match self.kind {
            KeyKind::Bool => match v {
                "true" | "on" | "1" => Value::Bool(true),
                "false" | "off" | "0" => Value::Bool(false),
                _ => return Err(bad("true or false")),
            },
            KeyKind::Number | KeyKind::Millis => {
                let n: u64 = v.parse().map_err(|_| bad("a non-negative number"))?;
                if n > self.max {
                    return Err(bad(&format!("a number up to {}", self.max)));
                }
                Value::Number(n)
            }
            KeyKind::Cache => {
                Value::Cache(v.parse::<SecondLevel>().map_err(|_| bad(&cache_names()))?)
            }
        };
        (self.put)(cfg, parsed);
        Ok(())
    }
}

/// The second-level cache names, as a help text lists them
/// (`smc, dfc, cd, none, hybrid or auto`).
pub fn cache_names() -> String {
    let names: Vec<&str> = SecondLevel::ALL.iter().map(|l| l.name()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// A key or value that could not be applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// No such key.
    #[error("unknown key '{0}' (known keys: {known})", known = key_names().join(", "))]
    Unknown(String),
    /// The value does not parse as the key's kind.
    #[error("{key}={value}: expected {expected}")]
    BadValue {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What was expected.
        expected: String,
    },
}

/// A numeric key over `Config::$field` of type `$ty` (its range is the
/// type's).
macro_rules! number_key {
    ($name:literal, $field:ident, $ty:ty, $kind:expr, $applies:expr, $help:literal) => {
        ConfigKey {
            name: $name,
            kind: $kind,
            help: $help,
            applies: $applies,
            off_flag: None,
            max: <$ty>::MAX as u64,
            get: |c| Value::Number(c.$field as u64),
            put: |c, v| {
                // `set` checked the value against `max`.
                if let Value::Number(n) = v {
                    c.$field = n as $ty;
                }
            },
        }
    };
}

/// A key over `Config::$field: bool`, on by default, turned off on the
/// command line by `--$off`.
macro_rules! bool_key {
    ($name:literal, $field:ident, $off:literal, $help:literal) => {
        ConfigKey {
            name: $name,
            kind: KeyKind::Bool,
            help: $help,
            applies: Applies::Live,
            off_flag: Some($off),
            max: 1,
            get: |c| Value::Bool(c.$field),
            put: |c, v| {
                if let Value::Bool(b) = v {
                    c.$field = b;
                }
            },
        }
    };
}

/// Every key, in the order `config/show` prints them.
pub static KEYS: &[ConfigKey] = &[
    bool_key!(
        "emc-enable",
        emc_enable,
        "no-emc",
        "The exact match cache in front of everything (OVS's emc-enable)."
    ),
    number_key!(
        "emc-insert-inv-prob",
        emc_insert_inv_prob,
        u32,
        KeyKind::Number,
        Applies::Live,
        "EMC insertion: a miss is inserted with probability 1/N (1 = always, 0 = never), as OVS's other_config:emc-insert-inv-prob."
    ),
    ConfigKey {
        name: "second-level",
        kind: KeyKind::Cache,
        help: "The second-level cache between the EMC and the megaflow classifier: smc (OVS's smc-enable=true), dfc, cd, hybrid, auto (EMC and hybrid table switched on and off by measurement) or none (OVS's default).",
        applies: Applies::RebuildsTier,
        off_flag: None,
        max: 0,
        get: |c| Value::Cache(c.second_level),
        put: |c, v| {
            if let Value::Cache(l) = v {
                c.second_level = l;
            }
        },
    },
    bool_key!(
        "megaflows",
        megaflows,
        "no-megaflows",
        "Wildcarded megaflows; off installs exact-match megaflows, as `ovs-appctl upcall/disable-megaflows`."
    ),
    number_key!(
        "flow-limit",
        flow_limit,
        usize,
        KeyKind::Number,
        Applies::Live,
        "No megaflow is installed while this many are live (the packet still gets its actions; counted as a failed upcall); the switch's revalidator lowers it under load, as OVS's."
    ),
    number_key!(
        "max-idle",
        max_idle_ms,
        u64,
        KeyKind::Millis,
        Applies::Live,
        "Megaflows idle for longer than this (ms of datapath time) are removed (checked every 500 ms), as OVS's other_config:max-idle."
    ),
    number_key!(
        "upcall-budget",
        upcall_budget_per_ms,
        u32,
        KeyKind::Number,
        Applies::Live,
        "Upcall budget against new-flow storms: at most N upcalls per input port per millisecond; further misses are dropped before the slow path (counted as failed upcalls). 0 = no budget (OVS)."
    ),
    number_key!(
        "pmd-maxsleep",
        pmd_maxsleep_us,
        u32,
        KeyKind::Number,
        Applies::Live,
        "Longest sleep of an idle PMD thread of `flowpath switch`, in µs (as OVS's other_config:pmd-maxsleep; at most 10000): 0 spins without sleeping (OVS's default: lowest latency, a whole core); the default lets an idle switch cost almost no CPU, at up to that much added latency for the first packet after a quiet spell."
    ),
    number_key!(
        "mask-budget",
        mask_budget,
        usize,
        KeyKind::Number,
        Applies::Live,
        "Mask budget against tuple space explosion: once an input port has N megaflow masks (subtables), new megaflows are widened into an existing mask or exact match. 0 = no budget (OVS)."
    ),
    number_key!(
        "emc-entries",
        emc_entries,
        usize,
        KeyKind::Number,
        Applies::RebuildsTier,
        "EMC entries (a power of two, 2 to 65536; OVS: 8192)."
    ),
    number_key!(
        "smc-entries",
        smc_entries,
        usize,
        KeyKind::Number,
        Applies::RebuildsTier,
        "SMC entries (a power of two, at least 4; OVS: 1M)."
    ),
    number_key!(
        "dfc-entries",
        dfc_entries,
        usize,
        KeyKind::Number,
        Applies::RebuildsTier,
        "DFC entries (a power of two)."
    ),
    number_key!(
        "cd-buckets",
        cd_buckets,
        usize,
        KeyKind::Number,
        Applies::RebuildsTier,
        "Cuckoo Distributor buckets (a power of two)."
    ),
    number_key!(
        "cd-ways",
        cd_ways,
        usize,
        KeyKind::Number,
        Applies::RebuildsTier,
        "Cuckoo Distributor entries per bucket: 8 or 16."
    ),
    number_key!(
        "hybrid-buckets",
        hybrid_buckets,
        usize,
        KeyKind::Number,
        Applies::RebuildsTier,
        "Hybrid table buckets of 16 entries (a power of two)."
    ),
    number_key!(
        "auto-interval",
        auto_interval_ms,
        u64,
        KeyKind::Millis,
        Applies::Live,
        "second-level=auto: interval between explorations of the tiers while the choice holds (ms)."
    ),
    number_key!(
        "subtable-rerank-interval",
        subtable_rerank_interval_ms,
        u64,
        KeyKind::Millis,
        Applies::Live,
        "Interval between re-rankings of the megaflow classifier's subtables by hits (ms; OVS: 1000)."
    ),
];

/// The configuration flowpath's commands start from: [`Config::default`]
/// with OVS's defaults where they differ (no second-level cache).
pub fn defaults() -> Config {
    Config {
        second_level: SecondLevel::None,
        ..Config::default()
    }
}

/// The key named `name`.
pub fn key(name: &str) -> Option<&'static ConfigKey> {
    KEYS.iter().find(|k| k.name == name)
}

/// Every key's name, in [`KEYS`] order.
pub fn key_names() -> Vec<&'static str> {
    KEYS.iter().map(|k| k.name).collect()
}

/// Sets key `name` of `cfg` to `value` (the caller validates the whole
/// config afterwards: [`Config::validate`]).
pub fn set(cfg: &mut Config, name: &str, value: &str) -> Result<(), KeyError> {
    key(name.trim())
        .ok_or_else(|| KeyError::Unknown(name.trim().to_string()))?
        .set(cfg, value)
}

/// The documentation's table of keys (Markdown): name, kind, default,
/// where it applies, what it does.
pub fn markdown_table() -> String {
    let mut out =
        String::from("| key | value | default | applies | what |\n|---|---|---|---|---|\n");
    for k in KEYS {
        let name = match k.off_flag {
            Some(off) => format!("`{}` (`--{off}` turns it off)", k.name),
            None => format!("`{}` (`--{}`)", k.name, k.name),
        };
        let applies = match k.applies {
            Applies::Live => "live",
            Applies::RebuildsTier => "live; the tier starts empty",
        };
        out.push_str(&format!(
            "| {name} | {} | `{}` | {applies} | {} |\n",
            k.kind.placeholder(),
            k.default_value(),
            k.help.replace('|', "\\|")
        ));
    }
    out
}

/// Every key with its value in `cfg`, in [`KEYS`] order.
pub fn show(cfg: &Config) -> Vec<(&'static str, String)> {
    KEYS.iter().map(|k| (k.name, k.get(cfg))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_shown_values_set_back() {
        let mut names = key_names();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate key names");
        // A config where every key differs from its default: show, set
        // each shown value into the defaults, get the same config back.
        let mut odd = defaults();
        for (k, v) in [
            ("emc-enable", "false"),
            ("emc-insert-inv-prob", "7"),
            ("second-level", "hybrid"),
            ("megaflows", "off"),
            ("flow-limit", "1234"),
            ("max-idle", "99"),
            ("upcall-budget", "5"),
            ("pmd-maxsleep", "50"),
            ("mask-budget", "6"),
            ("emc-entries", "1024"),
            ("smc-entries", "64"),
            ("dfc-entries", "128"),
            ("cd-buckets", "256"),
            ("cd-ways", "8"),
            ("hybrid-buckets", "512"),
            ("auto-interval", "77"),
            ("subtable-rerank-interval", "88"),
        ] {
            set(&mut odd, k, v).unwrap();
        }
        assert_eq!(odd.validate(), Ok(()));
        for k in KEYS {
            assert_ne!(k.get(&odd), k.default_value(), "{} not changed", k.name);
        }
        let mut back = defaults();
        for (k, v) in show(&odd) {
            set(&mut back, k, &v).unwrap();
        }
        assert_eq!(back, odd);
    }

    #[test]
    fn bad_keys_and_values_are_named() {
        let mut c = defaults();
        let e = set(&mut c, "colour", "blue").unwrap_err().to_string();
        assert!(
            e.contains("unknown key 'colour'") && e.contains("mask-budget"),
            "{e}"
        );
        let e = set(&mut c, "flow-limit", "x").unwrap_err().to_string();
        assert_eq!(e, "flow-limit=x: expected a non-negative number");
        let e = set(&mut c, "emc-enable", "maybe").unwrap_err().to_string();
        assert_eq!(e, "emc-enable=maybe: expected true or false");
        let e = set(&mut c, "second-level", "emc").unwrap_err().to_string();
        assert!(e.contains("smc, dfc, cd, none, hybrid or auto"), "{e}");
        let e = set(&mut c, "upcall-budget", "5000000000")
            .unwrap_err()
            .to_string();
        assert!(e.contains("up to 4294967295"), "{e}");
        assert_eq!(c, defaults(), "failed sets change nothing");
    }
}
