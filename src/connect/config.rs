//! Reading a connector's configuration, a map of string keys to string values, the way Kafka
//! Connect's `ConfigDef` does: typed getters with defaults, and errors that name the key to fix.
//! The reader remembers which keys were read so the caller can report the others.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use regex::Regex;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {message}")]
    File { path: String, message: String },
    /// Holds only what precedes a `=` (nothing, if there is none): the argument may be a secret.
    #[error("a `--set` argument is not of the form key=value (the argument is not shown: it may hold a secret)")]
    Override(String),
    #[error("config key `{key}`: {message}")]
    Invalid { key: String, message: String },
    #[error("config key `{key}` is required: {hint}")]
    Missing { key: String, hint: String },
}

/// What is wrong with a regular expression, without the expression itself: the regex crate's
/// message quotes the pattern, and a configured value is never repeated in an error (it may be a
/// secret, or a file's contents read through a config provider).
pub fn regex_problem(e: &regex::Error) -> String {
    match e {
        regex::Error::Syntax(text) => text
            .lines()
            .find_map(|l| l.trim().strip_prefix("error:"))
            .map_or_else(|| "a syntax error".to_string(), |why| why.trim().to_string()),
        regex::Error::CompiledTooBig(limit) => format!("it compiles to more than {limit} bytes"),
        _ => "it cannot be compiled".to_string(),
    }
}

impl ConfigError {
    pub fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid { key: key.to_string(), message: message.into() }
    }
}

/// Reads keys off a config map, remembering which were consumed so the rest can be reported.
pub struct Reader<'a> {
    entries: &'a BTreeMap<String, String>,
    used: BTreeSet<String>,
    warnings: Vec<String>,
}

impl<'a> Reader<'a> {
    pub fn new(entries: &'a BTreeMap<String, String>) -> Self {
        Reader { entries, used: BTreeSet::new(), warnings: Vec::new() }
    }

    /// Something the operator should change, though it works (a deprecated class or key).
    pub fn warn(&mut self, message: impl Into<String>) {
        self.warnings.push(message.into());
    }

    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Whether the key is given (with a non-empty value), without consuming it.
    pub fn has(&self, key: &str) -> bool {
        self.entries.get(key).is_some_and(|v| !v.trim().is_empty())
    }

    /// `key`, or when it is not given, the legacy key of Debezium 1.x read as 1.x did, with a
    /// warning naming the current key.
    pub fn str_or_legacy(&mut self, key: &str, legacy: &str) -> Option<&'a str> {
        if let Some(v) = self.str(key) {
            return Some(v);
        }
        let v = self.str(legacy)?;
        self.warn(format!("`{legacy}` is Debezium 1.x's name for `{key}`; it is read as `{key}`, rename it"));
        Some(v)
    }

    /// The keys read so far (given or not).
    pub fn used(&self) -> &BTreeSet<String> {
        &self.used
    }

    /// Marks every key under `prefix` as consumed (the options of a transform that ignores them).
    pub fn consume_prefix(&mut self, prefix: &str) {
        let keys: Vec<String> = self.entries.keys().filter(|k| k.starts_with(prefix)).cloned().collect();
        self.used.extend(keys);
    }

    /// Marks a key as consumed without reading it (a key another part of the program handles).
    pub fn consume(&mut self, key: &str) {
        self.used.insert(key.to_string());
    }

    /// The keys that start with `prefix`, consumed or not.
    pub fn keys_with_prefix(&self, prefix: &str) -> Vec<&'a str> {
        self.entries
            .range(prefix.to_string()..)
            .map(|(k, _)| k.as_str())
            .take_while(|k| k.starts_with(prefix))
            .collect()
    }

    /// The trimmed value without consuming the key: a key checked here but acted on nowhere stays
    /// in the list of keys pgoutbox ignores.
    pub fn peek(&self, key: &str) -> Option<&'a str> {
        self.entries.get(key).map(|s| s.trim()).filter(|s| !s.is_empty())
    }

    /// The trimmed value; an empty value counts as unset.
    pub fn str(&mut self, key: &str) -> Option<&'a str> {
        self.used.insert(key.to_string());
        self.entries.get(key).map(|s| s.trim()).filter(|s| !s.is_empty())
    }

    /// The value as given, even empty; `None` only when the key is absent.
    pub fn raw(&mut self, key: &str) -> Option<&'a str> {
        self.used.insert(key.to_string());
        self.entries.get(key).map(String::as_str)
    }

    pub fn string_or(&mut self, key: &str, default: &str) -> String {
        self.str(key).unwrap_or(default).to_string()
    }

    pub fn required(&mut self, key: &str, hint: &str) -> Result<String, ConfigError> {
        self.str(key)
            .map(str::to_string)
            .ok_or_else(|| ConfigError::Missing { key: key.to_string(), hint: hint.to_string() })
    }

    pub fn bool_or(&mut self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.str(key) {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(_) => Err(ConfigError::invalid(key, "is not a boolean; use true or false")),
        }
    }

    pub fn int_or<T: std::str::FromStr>(&mut self, key: &str, default: T, what: &str) -> Result<T, ConfigError> {
        match self.str(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| ConfigError::invalid(key, format!("is not {what}"))),
        }
    }

    pub fn millis_or(&mut self, key: &str, default_ms: u64) -> Result<Duration, ConfigError> {
        Ok(Duration::from_millis(self.int_or(key, default_ms, "a number of milliseconds")?))
    }

    /// One of the named options, matched case-insensitively.
    pub fn choice<T: Copy>(&mut self, key: &str, default: T, options: &[(&str, T)]) -> Result<T, ConfigError> {
        let Some(v) = self.str(key) else { return Ok(default) };
        options.iter().find(|(name, _)| name.eq_ignore_ascii_case(v)).map(|(_, t)| *t).ok_or_else(|| {
            let names: Vec<_> = options.iter().map(|(n, _)| *n).collect();
            ConfigError::invalid(key, format!("is not one of {}", names.join(", ")))
        })
    }

    /// A comma-separated list of regexes, each anchored and case-insensitive (as Debezium matches
    /// its include and exclude lists).
    pub fn regex_list(&mut self, key: &str) -> Result<Vec<Regex>, ConfigError> {
        let v = self.str(key);
        Self::regexes(key, v)
    }

    /// [`regex_list`](Self::regex_list), falling back to Debezium 1.x's name of the key.
    pub fn regex_list_or_legacy(&mut self, key: &str, legacy: &str) -> Result<Vec<Regex>, ConfigError> {
        let from_legacy = !self.has(key) && self.has(legacy);
        let v = self.str_or_legacy(key, legacy);
        Self::regexes(if from_legacy { legacy } else { key }, v)
    }

    fn regexes(key: &str, v: Option<&str>) -> Result<Vec<Regex>, ConfigError> {
        let Some(v) = v else { return Ok(Vec::new()) };
        split_regex_list(v)
            .map_err(|m| ConfigError::invalid(key, m))?
            .iter()
            .map(String::as_str)
            .filter(|s| !s.is_empty())
            .map(|p| {
                Regex::new(&format!("(?i)^(?:{p})$")).map_err(|e| {
                    ConfigError::invalid(key, format!("holds an invalid regular expression: {}", regex_problem(&e)))
                })
            })
            .collect()
    }
}

/// Debezium's `Strings.RegExSplitter`: a list of regular expressions split at the commas a
/// backslash does not escape (so `\,` is a comma inside an expression, e.g. in `{1\,3}`), each part
/// trimmed and its `\,` made a plain comma; other escapes stay for the expression.
pub fn split_regex_list(v: &str) -> Result<Vec<String>, String> {
    let mut parts = Vec::new();
    let mut part = String::new();
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    return Err("ends with a lone backslash (an unterminated escape sequence)".into());
                };
                part.push('\\');
                part.push(next);
            }
            ',' => parts.push(std::mem::take(&mut part)),
            c => part.push(c),
        }
    }
    parts.push(part);
    Ok(parts.into_iter().filter(|p| !p.is_empty()).map(|p| p.trim().replace("\\,", ",")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As Debezium splits its include and exclude lists.
    #[test]
    fn a_regex_list_splits_at_unescaped_commas_only() {
        let split = |v: &str| split_regex_list(v).unwrap();
        assert_eq!(split("public.outbox, public.events"), ["public.outbox", "public.events"]);
        assert_eq!(split(r"public.outbox_\d{1\,3}"), [r"public.outbox_\d{1,3}"]);
        assert_eq!(split(r"a\.b,c"), [r"a\.b", "c"], "other escapes stay for the expression");
        assert_eq!(split("a,,b"), ["a", "b"]);
        assert!(split_regex_list("a,b\\").is_err());
        let entries: std::collections::BTreeMap<String, String> =
            [("table.include.list".to_string(), r"public\.outbox_\d{2\,3}".to_string())].into();
        let list = Reader::new(&entries).regex_list("table.include.list").unwrap();
        assert!(list[0].is_match("public.outbox_123") && !list[0].is_match("public.outbox_1"));
    }
}
