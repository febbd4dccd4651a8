//! Results as text: the terminal tables, CSV and JSON.
//!
//! - [`summary_table`]: the layout of the seeds' tables — one row per
//!   workload (flows or subtables), one Mpps column per configuration, and
//!   a gain column (best configuration against the first, in %).
//! - [`detail_table`]: one row per result with cycles per packet, the hit
//!   breakdown per tier, subtable lookups per megaflow hit, megaflows and
//!   the on-CPU share.
//! - [`to_csv`] / [`to_json`]: one row / object per result, the keys of
//!   [`BenchResult`]'s serialization, in its order.

use crate::result::BenchResult;
use std::fmt::Write as _;

/// Distinct values of `f` over `results`, in first-seen order.
fn distinct<'a>(
    results: &'a [BenchResult],
    f: impl Fn(&'a BenchResult) -> &'a str,
) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for r in results {
        let v = f(r);
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// Markdown-style table: workloads × configurations (Mpps) plus the gain
/// of the best configuration over the first.
pub fn summary_table(results: &[BenchResult]) -> String {
    let workloads = distinct(results, |r| &r.workload);
    let configs = distinct(results, |r| &r.config);
    let mut head: Vec<String> = vec!["workload".into()];
    head.extend(configs.iter().map(|c| format!("{c} Mpps")));
    if configs.len() >= 2 {
        head.push(format!("gain vs {}", configs[0]));
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    for w in &workloads {
        let mut row = vec![w.to_string()];
        let mut vals: Vec<Option<f64>> = Vec::new();
        for c in &configs {
            let v = results
                .iter()
                .find(|r| r.workload == *w && r.config == *c)
                .map(|r| r.mpps);
            row.push(v.map_or("-".into(), |v| format!("{v:.2}")));
            vals.push(v);
        }
        if configs.len() >= 2 {
            let best = vals[1..]
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.map(|v| (i + 1, v)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            row.push(match (vals[0], best) {
                (Some(base), Some((i, v))) if base > 0.0 => {
                    format!("{:+.1} % ({})", (v / base - 1.0) * 100.0, configs[i])
                }
                _ => "-".into(),
            });
        }
        rows.push(row);
    }
    render(&head, &rows, 1)
}

/// One row per result: Mpps, cycles/packet and where packets were decided.
pub fn detail_table(results: &[BenchResult]) -> String {
    let head: Vec<String> = [
        "workload",
        "config",
        "Mpps",
        "cyc/pkt",
        "EMC %",
        "2nd-level %",
        "megaflow %",
        "upcall %",
        "subtbl/hit",
        "megaflows",
        "on-CPU %",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            let s = &r.stats;
            vec![
                r.workload.clone(),
                r.config.clone(),
                format!("{:.2}", r.mpps),
                format!("{:.0}", s.avg_processing_cycles_per_packet),
                format!("{:.1}", r.pct(s.emc_hits)),
                format!("{:.1}", r.pct(r.second_level_hits())),
                format!("{:.1}", r.pct(s.megaflow_hits)),
                format!("{:.2}", r.pct(r.misses())),
                if s.megaflow_hits > 0 {
                    format!("{:.2}", s.avg_subtable_lookups_per_megaflow_hit)
                } else {
                    "-".into()
                },
                s.megaflows.to_string(),
                r.oncpu_pct.map_or("-".into(), |p| format!("{p:.1}")),
            ]
        })
        .collect();
    render(&head, &rows, 2)
}

/// A Markdown table with columns padded for the terminal: the first
/// `left` columns (names) left-aligned, the others (numbers) right-aligned.
pub fn render(head: &[String], rows: &[Vec<String>], left: usize) -> String {
    let n = head.len();
    let mut width: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        out.push('|');
        for (i, w) in width.iter().enumerate() {
            let c = cells.get(i).map_or("", String::as_str);
            if i < left {
                let _ = write!(out, " {c:<w$} |");
            } else {
                let _ = write!(out, " {c:>w$} |");
            }
        }
        out.push('\n');
    };
    line(head, &mut out);
    out.push('|');
    for (i, w) in width.iter().enumerate() {
        if i < left {
            let _ = write!(out, "{}|", "-".repeat(w + 2));
        } else {
            let _ = write!(out, "{}:|", "-".repeat(w + 1));
        }
    }
    out.push('\n');
    for r in rows {
        line(r, &mut out);
    }
    out
}

/// The results as a JSON array (pretty-printed).
pub fn to_json(results: &[BenchResult]) -> String {
    // Serializing plain structs of numbers and strings cannot fail.
    serde_json::to_string_pretty(results).unwrap_or_else(|_| "[]".into())
}

fn csv_field(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => {
            if s.contains([',', '"', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.clone()
            }
        }
        serde_json::Value::Array(a) => a.iter().map(csv_field).collect::<Vec<_>>().join(" "),
        other => other.to_string(),
    }
}

/// The results as CSV: a header of the JSON keys (in serialization order)
/// and one row per result.
pub fn to_csv(results: &[BenchResult]) -> String {
    let mut out = String::new();
    let mut header: Vec<String> = Vec::new();
    for (n, r) in results.iter().enumerate() {
        // The struct serializes as a map; re-read its text to keep the
        // field order (serde_json's Value map is sorted).
        let text = serde_json::to_string(r).unwrap_or_default();
        let fields = ordered_fields(&text);
        if n == 0 {
            header = fields.iter().map(|(k, _)| k.clone()).collect();
            out.push_str(&header.join(","));
            out.push('\n');
        }
        let row: Vec<String> = header
            .iter()
            .map(|k| {
                fields
                    .iter()
                    .find(|(fk, _)| fk == k)
                    .map_or(String::new(), |(_, v)| csv_field(v))
            })
            .collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

/// The top-level (key, value) pairs of a JSON object text, in text order.
fn ordered_fields(text: &str) -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text);
    let v: Result<OrderedObject, _> = serde::Deserialize::deserialize(&mut de);
    if let Ok(o) = v {
        out = o.0;
    }
    out
}

/// A JSON object read as an ordered list of pairs.
struct OrderedObject(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for OrderedObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = OrderedObject;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<OrderedObject, A::Error> {
                let mut v = Vec::new();
                while let Some((k, val)) = m.next_entry::<String, serde_json::Value>()? {
                    v.push((k, val));
                }
                Ok(OrderedObject(v))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::tests::sample;

    fn results() -> Vec<BenchResult> {
        vec![
            sample("flows-rr-1", "emc", 1, 20.0),
            sample("flows-rr-1", "none", 1, 10.0),
            sample("flows-rr-1000", "emc", 1000, 15.0),
            sample("flows-rr-1000", "none", 1000, 18.0),
        ]
    }

    #[test]
    fn summary_layout() {
        let t = summary_table(&results());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].contains("emc Mpps") && lines[0].contains("none Mpps"));
        assert!(lines[0].contains("gain vs emc"));
        assert!(
            lines[2].contains("20.00") && lines[2].contains("-50.0 % (none)"),
            "{t}"
        );
        assert!(lines[3].contains("+20.0 % (none)"), "{t}");
    }

    #[test]
    fn detail_layout() {
        let t = detail_table(&results());
        assert_eq!(t.lines().count(), 6);
        assert!(t.contains("| flows-rr-1000 | none   |"), "{t}");
        assert!(t.contains("60.0"));
    }

    #[test]
    fn csv_and_json_shape() {
        let rs = results();
        let csv = to_csv(&rs);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0].starts_with("workload,config,mpps,packets_received,"));
        let n = lines[0].split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == n));
        assert!(lines[1].starts_with("flows-rr-1,emc,20.0,100,60,"));
        let v: serde_json::Value = serde_json::from_str(&to_json(&rs)).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 4);
        assert_eq!(v[3]["config"], "none");
        assert_eq!(csv_field(&serde_json::json!("a,b")), "\"a,b\"");
        assert_eq!(csv_field(&serde_json::json!([1.5, 2.0])), "1.5 2.0");
    }
}
