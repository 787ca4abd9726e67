//! The Prometheus alert rules of `contrib/prometheus/redbike-alerts.yml`: each rule is
//! complete, every metric they name is one `redbike stats --format prometheus` (and so
//! serve's /metrics) exports, and `promtool check rules` accepts the file when
//! installed.

use std::process::Command;

use crate::harness::*;

const RULES: &str = include_str!("../../../contrib/prometheus/redbike-alerts.yml");

/// The `redbike_*` names in `text`.
fn metric_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("redbike_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

#[test]
fn every_rule_is_complete_and_names_only_metrics_redbike_exports() {
    let s = RedisServer::start();
    let d = workdir();
    let exported = bike(&s, d.path())
        .args(["stats", "--format", "prometheus", "--queues", "A"])
        .ok();
    let exported: Vec<String> = exported
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect();
    let mut rules = 0;
    for rule in RULES.split("- alert: ").skip(1) {
        rules += 1;
        let name = rule.lines().next().unwrap().trim();
        assert!(name.starts_with("Redbike"), "{name}");
        let expr = rule
            .lines()
            .find_map(|l| l.trim().strip_prefix("expr: "))
            .unwrap_or_else(|| panic!("{name}: no expr"));
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{name}: {expr}");
        for metric in names {
            assert!(
                exported.contains(&metric),
                "{name}: {metric} is not exported ({exported:?})"
            );
        }
        for key in ["for: ", "severity: ", "summary: ", "description: "] {
            assert!(rule.contains(key), "{name}: no {key}");
        }
    }
    assert!(rules >= 8, "{rules} rules");
}

#[test]
fn promtool_accepts_the_rules() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/contrib/prometheus/redbike-alerts.yml"
    );
    let Ok(out) = Command::new("promtool")
        .args(["check", "rules", file])
        .output()
    else {
        skip("promtool is not installed (apt-get install prometheus): rules not checked");
        return;
    };
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
