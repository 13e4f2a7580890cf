//! Reading a connector configuration file: Java `.properties` (what Kafka Connect's standalone worker
//! reads) or the JSON body users POST to Connect's REST API (`{"name": ..., "config": {...}}`), chosen
//! by file extension.

use std::collections::BTreeMap;
use std::path::Path;

use super::ConfigError;

/// Keys and values as written, after `--set` overrides. Later definitions win, as in Java.
#[derive(Debug, Clone, Default)]
pub struct RawConfig {
    pub entries: BTreeMap<String, String>,
    /// The file's name without its extension: the connector's name when the config has no `name`.
    pub source_name: Option<String>,
}

impl RawConfig {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::File { path: path.display().to_string(), message: e.to_string() })?;
        let is_json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let mut raw = if is_json {
            parse_json(&text).map_err(|message| ConfigError::File { path: path.display().to_string(), message })?
        } else {
            parse_properties(&text)
        };
        raw.source_name = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        Ok(raw)
    }

    /// Applies a `key=value` override from the command line.
    pub fn set(&mut self, assignment: &str) -> Result<(), ConfigError> {
        let (k, v) = assignment.split_once('=').ok_or_else(|| ConfigError::Override(String::new()))?;
        let k = k.trim();
        if k.is_empty() {
            return Err(ConfigError::Override(String::new()));
        }
        self.entries.insert(k.to_string(), v.trim().to_string());
        Ok(())
    }
}

/// Parses Java properties text: `key=value`, `key: value` or `key value`; `#`/`!` comments; backslash
/// line continuations and escapes (`\t`, `\n`, `\uXXXX`, `\=`, `\:`, ...).
pub fn parse_properties(text: &str) -> RawConfig {
    let mut entries = BTreeMap::new();
    let mut logical = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if logical.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!')) {
            continue;
        }
        logical.push_str(trimmed);
        // An odd number of trailing backslashes continues the line.
        let trailing = logical.chars().rev().take_while(|&c| c == '\\').count();
        if trailing % 2 == 1 {
            logical.pop();
            if lines.clone().next().is_some() {
                continue;
            }
        }
        let (k, v) = split_key_value(&logical);
        entries.insert(unescape(&k), unescape(&v));
        logical.clear();
    }
    RawConfig { entries, source_name: None }
}

fn split_key_value(line: &str) -> (String, String) {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '=' | ':' | ' ' | '\t' | '\u{c}' => break,
            _ => i += 1,
        }
    }
    let key: String = chars[..i.min(chars.len())].iter().collect();
    let mut j = i;
    while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\u{c}') {
        j += 1;
    }
    if j < chars.len() && matches!(chars[j], '=' | ':') {
        j += 1;
        while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\u{c}') {
            j += 1;
        }
    }
    let value: String = chars[j.min(chars.len())..].iter().collect();
    (key, value)
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = it.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// Parses the Connect REST form `{"name": "...", "config": {...}}`, or a bare config object. Values may
/// be strings, numbers or booleans, as Connect accepts.
pub fn parse_json(text: &str) -> Result<RawConfig, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let obj = v.as_object().ok_or("the JSON config must be an object")?;
    let mut entries = BTreeMap::new();
    let config = match obj.get("config") {
        Some(c) => {
            if let Some(name) = obj.get("name").and_then(|n| n.as_str()) {
                entries.insert("name".to_string(), name.to_string());
            }
            c.as_object().ok_or("`config` must be an object")?
        }
        None => obj,
    };
    for (k, v) in config {
        let s = match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            serde_json::Value::Null => String::new(),
            _ => return Err(format!("value of `{k}` must be a string, number or boolean")),
        };
        entries.insert(k.clone(), s);
    }
    Ok(RawConfig { entries, source_name: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_follow_java_rules() {
        let raw = parse_properties(
            "# comment\n! also comment\n\nname = outbox-connector\nslot.name:slot1\ntopic.prefix dbserver1\n\
             transforms.outbox.route.topic.replacement=outbox.event.${routedByValue}\n\
             long.value=a,\\\n    b\nescaped\\=key=x\\ty\nunicode=caf\\u00e9\nempty=\n",
        );
        let e = &raw.entries;
        assert_eq!(e["name"], "outbox-connector");
        assert_eq!(e["slot.name"], "slot1");
        assert_eq!(e["topic.prefix"], "dbserver1");
        assert_eq!(e["transforms.outbox.route.topic.replacement"], "outbox.event.${routedByValue}");
        assert_eq!(e["long.value"], "a,b");
        assert_eq!(e["escaped=key"], "x\ty");
        assert_eq!(e["unicode"], "café");
        assert_eq!(e["empty"], "");
    }

    #[test]
    fn json_connect_rest_form_is_accepted() {
        let raw = parse_json(r#"{"name":"c1","config":{"slot.name":"s","database.port":5433,"x":true}}"#).unwrap();
        assert_eq!(raw.entries["name"], "c1");
        assert_eq!(raw.entries["database.port"], "5433");
        assert_eq!(raw.entries["x"], "true");
        assert!(parse_json("[1]").is_err());
        assert!(parse_json(r#"{"config":{"a":[1]}}"#).is_err());
    }

    #[test]
    fn overrides_replace_values() {
        let mut raw = parse_properties("slot.name=a\n");
        raw.set("slot.name=b").unwrap();
        assert_eq!(raw.entries["slot.name"], "b");
        assert!(raw.set("novalue").is_err());
    }
}
