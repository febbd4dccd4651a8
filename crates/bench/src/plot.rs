//! An SVG line plot of the results: Mpps against the number of flows
//! (logarithmic x axis), one line per configuration (and per workload
//! family, when several are plotted), written by hand — a few hundred
//! bytes of markup need no plotting library.
//!
//! Only results whose workload has a known flow count are drawn; a line
//! joins a series' points in order of flows.

use crate::result::BenchResult;
use std::fmt::Write as _;

const W: f64 = 820.0;
const H: f64 = 500.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 210.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// A series: its label and its (flows, Mpps) points sorted by flows.
/// Families measured at a single flow count (e.g. one subtables workload
/// next to a flows sweep) are left out when some family has a sweep.
fn series(results: &[BenchResult]) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut families: Vec<(&str, Vec<u64>)> = Vec::new();
    for r in results {
        let Some(x) = r.flows else { continue };
        match families.iter_mut().find(|(f, _)| *f == r.family) {
            Some((_, xs)) if !xs.contains(&x) => xs.push(x),
            Some(_) => {}
            None => families.push((&r.family, vec![x])),
        }
    }
    if families.iter().any(|(_, xs)| xs.len() > 1) {
        families.retain(|(_, xs)| xs.len() > 1);
    }
    let families: Vec<&str> = families.into_iter().map(|(f, _)| f).collect();
    let mut out: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in results {
        let Some(x) = r.flows else { continue };
        if !families.contains(&r.family.as_str()) {
            continue;
        }
        let label = if families.len() > 1 {
            format!("{} · {}", r.config, r.family)
        } else {
            r.config.clone()
        };
        let p = (x.max(1) as f64, r.mpps);
        match out.iter_mut().find(|(l, _)| *l == label) {
            Some((_, pts)) => pts.push(p),
            None => out.push((label, vec![p])),
        }
    }
    for (_, pts) in &mut out {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" step for about five ticks up to `max`.
fn y_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    mag * if n <= 1.0 {
        1.0
    } else if n <= 2.0 {
        2.0
    } else if n <= 5.0 {
        5.0
    } else {
        10.0
    }
}

/// The plot as an SVG document. `title` goes on top.
pub fn svg(results: &[BenchResult], title: &str) -> String {
    let ser = series(results);
    let pts = ser.iter().flat_map(|(_, p)| p.iter());
    let (mut xmin, mut xmax, mut ymax) = (f64::MAX, 0f64, 0f64);
    for &(x, y) in pts {
        xmin = xmin.min(x);
        xmax = xmax.max(x);
        ymax = ymax.max(y);
    }
    if xmin > xmax {
        (xmin, xmax) = (1.0, 10.0);
    }
    let (lo, mut hi) = (xmin.log10().floor(), xmax.log10().ceil());
    if hi <= lo {
        hi = lo + 1.0;
    }
    let step = y_step(ymax.max(1.0));
    let ytop = ((ymax.max(1.0) * 1.05) / step).ceil() * step;
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let sx = |x: f64| LEFT + (x.log10() - lo) / (hi - lo) * pw;
    let sy = |y: f64| TOP + ph - y / ytop * ph;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        LEFT + pw / 2.0,
        esc(title)
    );
    // Grid and ticks.
    let mut d = lo;
    while d <= hi + 1e-9 {
        let x = sx(10f64.powf(d));
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/>"##,
            TOP + ph
        );
        let label = match d as i32 {
            0 => "1".to_string(),
            1 => "10".to_string(),
            2 => "100".to_string(),
            3 => "1k".to_string(),
            4 => "10k".to_string(),
            5 => "100k".to_string(),
            6 => "1M".to_string(),
            7 => "10M".to_string(),
            e => format!("1e{e}"),
        };
        let _ = writeln!(
            s,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"#,
            TOP + ph + 18.0
        );
        d += 1.0;
    }
    let mut y = 0.0;
    while y <= ytop + 1e-9 {
        let py = sy(y);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/>"##,
            LEFT + pw
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            py + 4.0,
            if step < 1.0 {
                format!("{y:.1}")
            } else {
                format!("{y:.0}")
            }
        );
        y += step;
    }
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">flows (log scale)</text>"#,
        LEFT + pw / 2.0,
        H - 15.0
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">Mpps</text>"#,
        TOP + ph / 2.0,
        TOP + ph / 2.0
    );
    // Series and legend.
    for (i, (label, pts)) in ser.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#,
            path.join(" ")
        );
        for &(x, y) in pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{c}"><title>{}: {} flows, {y:.2} Mpps</title></circle>"#,
                sx(x),
                sy(y),
                esc(label),
                x
            );
        }
        let ly = TOP + 10.0 + 20.0 * i as f64;
        let lx = W - RIGHT + 15.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="3"/>"#,
            lx + 22.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">{}</text>"#,
            lx + 28.0,
            ly + 4.0,
            esc(label)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::tests::sample;

    #[test]
    fn one_line_per_config() {
        let rs = vec![
            sample("flows-rr-1", "emc", 1, 20.0),
            sample("flows-rr-1000", "emc", 1000, 15.0),
            sample("flows-rr-1", "none", 1, 10.0),
            sample("flows-rr-1000", "none", 1000, 12.0),
        ];
        let s = svg(&rs, "test <plot>");
        assert!(s.starts_with("<svg"));
        assert!(s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert_eq!(s.matches("<circle").count(), 4);
        assert!(s.contains("test &lt;plot&gt;"));
        assert!(s.contains(">1k</text>"));
    }

    #[test]
    fn single_point_families_are_left_out_next_to_a_sweep() {
        let mut sub = sample("subtables-20x50000", "emc", 1_000_000, 5.0);
        sub.family = "subtables-20".into();
        let rs = vec![
            sample("flows-rr-1", "emc", 1, 20.0),
            sample("flows-rr-1000", "emc", 1000, 15.0),
            sub.clone(),
        ];
        let s = series(&rs);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].0, "emc");
        assert_eq!(series(&[sub]).len(), 1, "alone, it is drawn");
    }

    #[test]
    fn steps() {
        assert_eq!(y_step(28.0), 10.0);
        assert_eq!(y_step(9.0), 2.0);
        assert!((y_step(0.4) - 0.1).abs() < 1e-12);
        let s = svg(&[], "empty");
        assert!(s.contains("</svg>"));
    }
}
