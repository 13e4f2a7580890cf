//! The Prometheus alert rules docs/operations.md ships: valid, behaving as their unit tests say
//! (`promtool test rules`), and the same in the file and in the document.

use std::path::Path;
use std::process::Command;

fn promtool(args: &[&str]) -> (bool, String) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/prometheus");
    let out = Command::new("promtool")
        .args(args)
        .current_dir(&dir)
        .output()
        .expect("promtool is missing: scripts/install.sh installs it (Debian's prometheus package)");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn alert_rules_are_valid_and_pass_their_unit_tests() {
    let (ok, out) = promtool(&["check", "rules", "pgoutbox.rules.yml"]);
    assert!(ok, "{out}");
    let (ok, out) = promtool(&["test", "rules", "pgoutbox.rules.test.yml"]);
    assert!(ok, "{out}");
}

#[test]
fn operations_guide_ships_the_tested_rules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rules = std::fs::read_to_string(root.join("docs/prometheus/pgoutbox.rules.yml")).unwrap();
    let guide = std::fs::read_to_string(root.join("docs/operations.md")).unwrap();
    assert!(guide.contains(&rules), "docs/operations.md must quote docs/prometheus/pgoutbox.rules.yml verbatim");
}

#[test]
fn operations_guide_lists_the_accepted_promtool_findings() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let findings = std::fs::read_to_string(root.join("docs/prometheus/promtool-warnings.txt")).unwrap();
    let guide = std::fs::read_to_string(root.join("docs/operations.md")).unwrap();
    let listed: Vec<&str> = findings.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).collect();
    assert!(!listed.is_empty());
    let block = listed.join("\n");
    assert!(
        guide.contains(&block),
        "docs/operations.md must list docs/prometheus/promtool-warnings.txt's findings, in order"
    );
}
