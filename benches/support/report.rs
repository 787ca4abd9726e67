//! The measurements, their targets, and the table printed at the end (also written as
//! JSON with `--json FILE`).

use std::collections::BTreeMap;

use serde::Serialize;

/// A speed target of one figure.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// The figure must be at least this.
    AtLeast(f64),
    /// The figure must be at most this.
    AtMost(f64),
    /// The figure must be at least this many times its Python figure of the same run.
    TimesPython(f64),
}

/// One measured figure.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// Its name, e.g. `load_per_s`.
    pub name: &'static str,
    /// The value.
    pub value: f64,
    /// Its unit, e.g. `jobs/s`.
    pub unit: &'static str,
    /// What it should reach (all of them).
    pub targets: Vec<Target>,
    /// The figure of the Python baseline it is compared with, if any.
    pub python: Option<&'static str>,
    /// How it was measured, printed under the table.
    pub how: String,
}

impl Measurement {
    /// A figure without targets or Python counterpart.
    pub fn new(name: &'static str, value: f64, unit: &'static str, how: String) -> Measurement {
        Measurement {
            name,
            value,
            unit,
            targets: Vec::new(),
            python: None,
            how,
        }
    }

    /// Adds a target.
    pub fn target(mut self, target: Target) -> Measurement {
        self.targets.push(target);
        self
    }

    /// Names the Python figure shown beside this one.
    pub fn python(mut self, figure: &'static str) -> Measurement {
        self.python = Some(figure);
        self
    }
}

/// Whether a figure meets its targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every target is met.
    Met,
    /// At least one target is missed.
    NotMet,
    /// None missed, but one needs a Python figure this run does not have.
    Unknown,
    /// The figure has no target.
    NoTarget,
    /// A smoke run (`cargo test --benches`): figures are not judged.
    NotJudged,
}

/// One line of the final table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The figure's name.
    pub name: &'static str,
    /// Its value.
    pub value: f64,
    /// Its unit.
    pub unit: &'static str,
    /// Its targets.
    pub targets: Vec<Target>,
    /// The Python figure's name and value, when measured in this run.
    pub python: Option<(&'static str, f64)>,
    /// The verdict.
    pub verdict: Verdict,
    /// How it was measured.
    pub how: String,
}

/// Judges `m` against its targets, with the Python figures of this run (if any).
pub fn judge(m: &Measurement, python: &BTreeMap<String, f64>, judged: bool) -> Row {
    let py = m.python.and_then(|n| python.get(n).map(|v| (n, *v)));
    let checks: Vec<Option<bool>> = m
        .targets
        .iter()
        .map(|t| match *t {
            Target::AtLeast(x) => Some(m.value >= x),
            Target::AtMost(x) => Some(m.value <= x),
            Target::TimesPython(k) => py.map(|(_, v)| m.value >= k * v),
        })
        .collect();
    let verdict = if !judged {
        Verdict::NotJudged
    } else if checks.is_empty() {
        Verdict::NoTarget
    } else if checks.contains(&Some(false)) {
        Verdict::NotMet
    } else if checks.contains(&None) {
        Verdict::Unknown
    } else {
        Verdict::Met
    };
    Row {
        name: m.name,
        value: m.value,
        unit: m.unit,
        targets: m.targets.clone(),
        python: py,
        verdict,
        how: m.how.clone(),
    }
}

/// A number as the table shows it: fewer decimals for bigger numbers.
pub fn number(x: f64) -> String {
    match x.abs() {
        a if a >= 100.0 => format!("{x:.0}"),
        a if a >= 10.0 => format!("{x:.1}"),
        _ => format!("{x:.2}"),
    }
}

fn describe_targets(targets: &[Target]) -> String {
    let parts: Vec<String> = targets
        .iter()
        .map(|t| match *t {
            Target::AtLeast(x) => format!(">= {}", number(x)),
            Target::AtMost(x) => format!("<= {}", number(x)),
            Target::TimesPython(k) => format!(">= {}x python", number(k)),
        })
        .collect();
    parts.join(" and ")
}

fn describe_verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Met => "met",
        Verdict::NotMet => "NOT MET",
        Verdict::Unknown => "? (no python)",
        Verdict::NoTarget => "-",
        Verdict::NotJudged => "(smoke run)",
    }
}

/// The cells of one row, in column order.
fn cells(row: &Row) -> Vec<String> {
    let (py, ratio) = match row.python {
        Some((name, v)) => (
            format!("{} ({name})", number(v)),
            format!("{}x", number(row.value / v)),
        ),
        None => ("-".into(), "-".into()),
    };
    vec![
        row.name.to_string(),
        number(row.value),
        row.unit.to_string(),
        describe_targets(&row.targets),
        describe_verdict(row.verdict).to_string(),
        py,
        ratio,
    ]
}

/// The table as text, columns padded to their widest cell, numbers right-aligned.
pub fn table(rows: &[Row]) -> String {
    let header: Vec<String> = [
        "figure",
        "value",
        "unit",
        "target",
        "status",
        "python",
        "vs python",
    ]
    .map(String::from)
    .to_vec();
    let lines: Vec<Vec<String>> = std::iter::once(header)
        .chain(rows.iter().map(cells))
        .collect();
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in &lines {
        let padded: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| match c {
                1 | 6 => format!("{cell:>w$}"),
                _ => format!("{cell:<w$}"),
            })
            .collect();
        out.push_str(padded.join("  ").trim_end());
        out.push('\n');
    }
    out
}
