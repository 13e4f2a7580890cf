//! Log levels that change while the process runs, under Kafka Connect's logger names
//! (`/admin/loggers`, KIP-495 and KIP-976).
//!
//! The process logs through one `tracing` subscriber whose filter (`RUST_LOG`, default `info`) can be
//! replaced. Operators name loggers as Connect's do: `root`, `io.debezium...`, `org.apache.kafka...`.
//! A Connect name that clearly corresponds to a part of pgoutbox stands for that part's targets
//! (`LOGGERS`); pgoutbox's own targets (`pgoutbox::pipeline`, `librdkafka`) are loggers too. Setting a
//! logger sets it and every known logger below it, as Connect does; the filter is then rebuilt from
//! the start-up directives plus one directive per target of each logger set (the more specific target
//! wins, as in log4j's hierarchy).

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

/// Connect's name for the logger above all others.
pub const ROOT: &str = "root";

/// Connect and Debezium logger names, and the pgoutbox targets each stands for (docs/operations.md
/// §"Log levels at runtime" has the same table).
pub const LOGGERS: &[(&str, &[&str])] = &[
    ("io.debezium", &["pgoutbox"]),
    ("io.debezium.connector.postgresql", &["pgoutbox::pipeline", "pgoutbox::postgres", "pgoutbox::pgoutput"]),
    ("io.debezium.connector.postgresql.connection", &["pgoutbox::postgres"]),
    ("io.debezium.connector.postgresql.snapshot", &["pgoutbox::pipeline::snapshot"]),
    ("io.debezium.transforms", &["pgoutbox::outbox", "pgoutbox::debezium"]),
    ("io.debezium.transforms.outbox", &["pgoutbox::outbox"]),
    ("io.debezium.converters", &["pgoutbox::connect"]),
    ("org.apache.kafka", &["pgoutbox::worker", "pgoutbox::connect", "pgoutbox::kafka", "librdkafka"]),
    ("org.apache.kafka.clients", &["pgoutbox::kafka", "librdkafka"]),
    ("org.apache.kafka.clients.producer", &["pgoutbox::kafka::producer", "librdkafka"]),
    ("org.apache.kafka.connect", &["pgoutbox::worker", "pgoutbox::connect"]),
    ("org.apache.kafka.connect.runtime", &["pgoutbox::worker"]),
    ("org.apache.kafka.connect.runtime.rest", &["pgoutbox::worker::rest"]),
    ("org.apache.kafka.connect.json", &["pgoutbox::connect"]),
    ("org.apache.kafka.connect.transforms", &["pgoutbox::connect::transforms"]),
];

/// pgoutbox's own targets, each a logger of its own name.
pub const TARGETS: &[&str] = &[
    "pgoutbox",
    "pgoutbox::check",
    "pgoutbox::config",
    "pgoutbox::connect",
    "pgoutbox::connect::transforms",
    "pgoutbox::debezium",
    "pgoutbox::http",
    "pgoutbox::kafka",
    "pgoutbox::kafka::producer",
    "pgoutbox::outbox",
    "pgoutbox::pgoutput",
    "pgoutbox::pipeline",
    "pgoutbox::pipeline::snapshot",
    "pgoutbox::postgres",
    "pgoutbox::verify",
    "pgoutbox::worker",
    "pgoutbox::worker::rest",
    "librdkafka",
];

/// The answer to a level `parse_level` does not take (Connect's 404 says `invalid log level 'X'.`;
/// no error repeats a value here).
pub const INVALID_LEVEL: &str = "invalid log level: expected OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE or ALL";

/// A level as Connect's loggers take it (log4j's names, any case); `None` for a name log4j does not
/// know. FATAL is logged as ERROR and ALL as TRACE, the nearest `tracing` has.
pub fn parse_level(s: &str) -> Option<&'static str> {
    Some(match s.trim().to_ascii_uppercase().as_str() {
        "OFF" => "OFF",
        "FATAL" => "FATAL",
        "ERROR" => "ERROR",
        "WARN" => "WARN",
        "INFO" => "INFO",
        "DEBUG" => "DEBUG",
        "TRACE" => "TRACE",
        "ALL" => "ALL",
        _ => return None,
    })
}

/// A level `parse_level` took, as an `EnvFilter` directive.
pub fn directive(level: &str) -> &'static str {
    match level {
        "OFF" => "off",
        "FATAL" | "ERROR" => "error",
        "WARN" => "warn",
        "INFO" => "info",
        "DEBUG" => "debug",
        _ => "trace",
    }
}

/// A logger's level as `/admin/loggers` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggerLevel {
    pub level: String,
    /// Milliseconds since the epoch of the last change through the API; `None` for a level set at start.
    pub last_modified: Option<u64>,
}

type Apply = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// The process's levels: what was set, and how to apply a new filter.
pub struct Levels {
    /// `RUST_LOG`'s directives, kept under every change.
    base: String,
    /// The root level at start (the bare level in `RUST_LOG`, else INFO).
    root: String,
    set: Mutex<BTreeMap<String, LoggerLevel>>,
    apply: Apply,
}

static LEVELS: OnceLock<Levels> = OnceLock::new();

/// Installs the process's levels (once, by the command line); `apply` replaces the subscriber's
/// filter with the directives it is given.
pub fn install(base: &str, apply: impl Fn(&str) -> Result<(), String> + Send + Sync + 'static) {
    let _ = LEVELS.set(Levels::new(base, Box::new(apply)));
}

/// The process's levels; without `install` (a library user, a test) levels are kept but nothing is
/// reloaded.
pub fn levels() -> &'static Levels {
    LEVELS.get_or_init(|| Levels::new("info", Box::new(|_| Ok(()))))
}

fn below(name: &str, namespace: &str) -> bool {
    name == namespace
        || name.strip_prefix(namespace).is_some_and(|rest| rest.starts_with('.') || rest.starts_with("::"))
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Levels {
    pub fn new(base: &str, apply: Apply) -> Levels {
        let root = base
            .split(',')
            .map(str::trim)
            .find(|d| !d.is_empty() && !d.contains('='))
            .and_then(parse_level)
            .unwrap_or("INFO");
        Levels { base: base.to_string(), root: root.to_string(), set: Mutex::new(BTreeMap::new()), apply }
    }

    fn known(&self, set: &BTreeMap<String, LoggerLevel>) -> Vec<String> {
        let mut names: Vec<String> = LOGGERS.iter().map(|(n, _)| n.to_string()).collect();
        names.extend(TARGETS.iter().map(|t| t.to_string()));
        names.extend(set.keys().cloned());
        names.sort();
        names.dedup();
        names
    }

    /// The level in effect for `name`: its own, else its nearest set ancestor's, else the root's.
    fn effective(&self, set: &BTreeMap<String, LoggerLevel>, name: &str) -> LoggerLevel {
        if let Some(l) = set.get(name) {
            return l.clone();
        }
        let ancestor = set.iter().filter(|(n, _)| *n != ROOT && below(name, n)).max_by_key(|(n, _)| n.len());
        let level = ancestor
            .map(|(_, l)| l.level.clone())
            .or_else(|| set.get(ROOT).map(|l| l.level.clone()))
            .unwrap_or_else(|| self.root.clone());
        LoggerLevel { level, last_modified: None }
    }

    /// Every logger with a level of its own, and the root (Connect's `GET /admin/loggers`).
    pub fn all(&self) -> BTreeMap<String, LoggerLevel> {
        let set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = set.clone();
        out.entry(ROOT.to_string()).or_insert_with(|| LoggerLevel { level: self.root.clone(), last_modified: None });
        out
    }

    /// One logger's level, `None` for a name that is no logger here.
    pub fn level(&self, name: &str) -> Option<LoggerLevel> {
        let set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        if name.eq_ignore_ascii_case(ROOT) {
            return Some(self.effective(&set, ROOT));
        }
        self.known(&set).iter().any(|n| n == name).then(|| self.effective(&set, name))
    }

    /// Sets `namespace` and every known logger below it (every logger, for the root) to `level` (a
    /// name `parse_level` took); returns the affected loggers, sorted. A logger already at the level
    /// keeps its last-modified time, as in Connect.
    pub fn set_level(&self, namespace: &str, level: &str) -> Result<Vec<String>, String> {
        let level = parse_level(level).ok_or_else(|| INVALID_LEVEL.to_string())?;
        let mut set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        let root = namespace.eq_ignore_ascii_case(ROOT);
        let mut affected: Vec<String> = self.known(&set).into_iter().filter(|n| root || below(n, namespace)).collect();
        let ns = if root { ROOT.to_string() } else { namespace.to_string() };
        if !affected.contains(&ns) {
            affected.push(ns);
        }
        let mut next = set.clone();
        let now = now_ms();
        for name in &affected {
            // Against the levels before this call: a child whose parent is set first is still changed.
            let current = self.effective(&set, name);
            if current.level != level || !next.contains_key(name) {
                let last_modified = if current.level == level { current.last_modified } else { Some(now) };
                next.insert(name.clone(), LoggerLevel { level: level.to_string(), last_modified });
            }
        }
        (self.apply)(&self.directives(&next))?;
        *set = next;
        affected.sort();
        Ok(affected)
    }

    /// The filter for a set of levels: the start-up directives, the root's level, then one
    /// directive per target of each logger set.
    fn directives(&self, set: &BTreeMap<String, LoggerLevel>) -> String {
        let mut out: Vec<String> = self
            .base
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty() && d.contains('='))
            .map(String::from)
            .collect();
        let root = set.get(ROOT).map(|l| l.level.as_str()).unwrap_or(&self.root);
        out.insert(0, directive(root).to_string());
        let mut targets: BTreeMap<&str, (&str, usize)> = BTreeMap::new();
        for (name, l) in set.iter().filter(|(n, _)| *n != ROOT) {
            let mapped: Vec<&str> = match LOGGERS.iter().find(|(n, _)| n == name) {
                Some((_, t)) => t.to_vec(),
                // A target of pgoutbox's, by its own name (characters a directive cannot misread).
                None if (TARGETS.contains(&name.as_str()) || name.contains("::"))
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') =>
                {
                    vec![name.as_str()]
                }
                None => Vec::new(),
            };
            for t in mapped {
                // Two Connect names on one target: the more specific name wins.
                match targets.get(t) {
                    Some((_, len)) if *len > name.len() => {}
                    _ => {
                        targets.insert(t, (l.level.as_str(), name.len()));
                    }
                }
            }
        }
        out.extend(targets.into_iter().map(|(t, (l, _))| format!("{t}={}", directive(l))));
        out.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn recording() -> (Levels, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let levels = Levels::new(
            "info,rdkafka=warn",
            Box::new(move |d| {
                s.lock().unwrap().push(d.to_string());
                Ok(())
            }),
        );
        (levels, seen)
    }

    #[test]
    fn a_connect_logger_sets_the_targets_it_stands_for_and_its_children() {
        let (levels, seen) = recording();
        assert_eq!(levels.all().keys().collect::<Vec<_>>(), vec!["root"]);
        assert_eq!(levels.level("io.debezium.transforms.outbox").unwrap().level, "INFO");
        assert!(levels.level("com.example.nothing").is_none());
        let affected = levels.set_level("io.debezium.transforms", "debug").unwrap();
        assert_eq!(affected, vec!["io.debezium.transforms", "io.debezium.transforms.outbox"]);
        let last = seen.lock().unwrap().last().cloned().unwrap();
        assert_eq!(last, "info,rdkafka=warn,pgoutbox::debezium=debug,pgoutbox::outbox=debug");
        let l = levels.level("io.debezium.transforms.outbox").unwrap();
        assert_eq!(l.level, "DEBUG");
        assert!(l.last_modified.is_some());
        // A more specific name wins on its own targets, whatever the order.
        levels.set_level("io.debezium", "WARN").unwrap();
        let last = seen.lock().unwrap().last().cloned().unwrap();
        assert!(last.contains("pgoutbox=warn"), "{last}");
        assert!(last.contains("pgoutbox::outbox=warn"), "every child was set too: {last}");
        levels.set_level("io.debezium.transforms.outbox", "TRACE").unwrap();
        let last = seen.lock().unwrap().last().cloned().unwrap();
        assert!(last.contains("pgoutbox::outbox=trace") && last.contains("pgoutbox=warn"), "{last}");
    }

    #[test]
    fn the_root_sets_every_logger_and_a_bad_level_changes_nothing() {
        let (levels, seen) = recording();
        assert_eq!(levels.set_level("root", "verbose"), Err(INVALID_LEVEL.to_string()));
        assert!(seen.lock().unwrap().is_empty());
        let affected = levels.set_level("root", "error").unwrap();
        assert!(affected.contains(&"root".to_string()) && affected.contains(&"librdkafka".to_string()));
        assert!(seen.lock().unwrap().last().unwrap().starts_with("error,"));
        assert_eq!(levels.level("pgoutbox::pipeline").unwrap().level, "ERROR");
        // A name nobody knew becomes a logger once set, and pgoutbox's own targets map to themselves.
        assert_eq!(
            levels.set_level("pgoutbox::pipeline::reader", "debug").unwrap(),
            vec!["pgoutbox::pipeline::reader"]
        );
        assert!(seen.lock().unwrap().last().unwrap().contains("pgoutbox::pipeline::reader=debug"));
        assert!(levels.all().contains_key("pgoutbox::pipeline::reader"));
    }

    #[test]
    fn a_filter_the_subscriber_refuses_changes_nothing() {
        let levels = Levels::new("info", Box::new(|_| Err("refused".into())));
        assert!(levels.set_level("io.debezium", "DEBUG").is_err());
        assert_eq!(levels.level("io.debezium").unwrap().level, "INFO");
    }
}
