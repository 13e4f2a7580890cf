//! The dependency rule, checked on the source: `config` -> `outbox` -> `debezium` -> `connect`, with
//! `postgres` and `kafka` beside them and `pipeline` on top; nothing below imports anything above,
//! and no two modules import each other. A `crate::<module>` path anywhere in a module's files
//! (tests included) counts as an import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// For each module, the modules it must not import.
const FORBIDDEN: &[(&str, &[&str])] = &[
    (
        "connect",
        &["debezium", "outbox", "config", "postgres", "kafka", "pipeline", "pgoutput", "check", "verify", "worker"],
    ),
    ("debezium", &["outbox", "config", "postgres", "kafka", "pipeline", "check", "verify"]),
    ("outbox", &["config", "postgres", "kafka", "pipeline", "check", "verify"]),
    ("config", &["postgres", "kafka", "pipeline", "check", "verify", "worker"]),
    ("pgoutput", &["connect", "debezium", "outbox", "config", "postgres", "kafka", "pipeline"]),
    ("lsn", &["connect", "debezium", "outbox", "config", "postgres", "kafka", "pipeline", "pgoutput"]),
    ("postgres", &["pipeline", "kafka", "check", "verify", "worker"]),
    ("kafka", &["pipeline", "postgres", "check", "verify", "worker"]),
    ("pipeline", &["worker", "check", "verify"]),
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`src/outbox/router/plan.rs` -> `outbox`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main" | "bin")).then(|| name.to_string())
}

fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let path = regex::Regex::new(r"crate::([a-z_]+)").unwrap();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let Some(module) = module_of(&src, &file) else { continue };
        let text = std::fs::read_to_string(&file).unwrap();
        let used = out.entry(module.clone()).or_default();
        for c in path.captures_iter(&text) {
            if c[1] != *module {
                used.insert(c[1].to_string());
            }
        }
    }
    out
}

#[test]
fn dependencies_point_one_way() {
    let imports = imports();
    let mut wrong = Vec::new();
    for (module, forbidden) in FORBIDDEN {
        let used = imports.get(*module).unwrap_or_else(|| panic!("module `{module}` not found under src/"));
        for f in *forbidden {
            if used.contains(*f) {
                wrong.push(format!("{module} imports {f}"));
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the dependency rule: {wrong:?}");
}

#[test]
fn no_two_modules_import_each_other() {
    let imports = imports();
    let mut cycles = Vec::new();
    for (a, used) in &imports {
        for b in used {
            if a < b && imports.get(b).is_some_and(|u| u.contains(a)) {
                cycles.push(format!("{a} <-> {b}"));
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles: {cycles:?}");
}

/// The rule above holds inside `connect`, `debezium` and `outbox` as well, between their files:
/// every `super::x` / `crate::<module>::x` edge between two files of a module, followed to a cycle.
#[test]
fn no_cycles_between_the_files_of_the_record_modules() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for module in ["connect", "debezium", "outbox"] {
        let dir = src.join(module);
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        // Submodule name (first component below the module; `mod.rs` and test files are skipped).
        let sub = |f: &Path| -> Option<String> {
            let rel = f.strip_prefix(&dir).ok()?;
            let first = rel.components().next()?.as_os_str().to_str()?.trim_end_matches(".rs").to_string();
            let is_test = rel.components().any(|c| c.as_os_str() == "tests.rs") || first == "tests";
            (first != "mod" && !is_test).then_some(first)
        };
        let edge = regex::Regex::new(&format!(r"(?:super|crate::{module})::(?:([a-z_]+)|\{{([^}}]*)\}})")).unwrap();
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let names: BTreeSet<String> = files.iter().filter_map(|f| sub(f)).collect();
        for f in &files {
            let Some(from) = sub(f) else { continue };
            let text = std::fs::read_to_string(f).unwrap();
            // Only the code: a file's unit tests may use its siblings freely.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for c in edge.captures_iter(code) {
                let targets: Vec<&str> = match (c.get(1), c.get(2)) {
                    (Some(one), _) => vec![one.as_str()],
                    (None, Some(list)) => {
                        list.as_str().split(',').map(|t| t.trim().split("::").next().unwrap_or("")).collect()
                    }
                    (None, None) => vec![],
                };
                for to in targets {
                    if to != from && names.contains(to) {
                        graph.entry(from.clone()).or_default().insert(to.to_string());
                    }
                }
            }
        }
        for start in graph.keys() {
            let mut stack: Vec<&String> = graph[start].iter().collect();
            let mut seen = BTreeSet::new();
            while let Some(n) = stack.pop() {
                assert!(n != start, "import cycle in {module}: through `{start}` and `{n}` ({graph:?})");
                if seen.insert(n.clone()) {
                    stack.extend(graph.get(n).into_iter().flatten());
                }
            }
        }
    }
}
