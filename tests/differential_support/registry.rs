//! Records of the schema-registry converters, compared through the registry: both sides register
//! their schemas in the suite's Apicurio Registry (scripts/registry.sh, started by scripts/test.sh),
//! under subjects of their own (the side prefix is in the topic), so their ids differ. Each id is
//! replaced by the schema it names before the byte comparison, and the versions registered under
//! each side's subjects are compared too.

use std::io::{Read, Write};
use std::time::Duration;

use pgoutbox::kafka::consume::ConsumedRecord;

/// Where a converter wrote the schema ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ids {
    /// Apicurio's default: `apicurio.{key,value}.globalId` headers (8 bytes, big-endian).
    Headers,
    /// Apicurio with headers off: magic 0 and the 8-byte globalId before the body.
    Prefix8Global,
    /// The Confluent wire format: magic 0 and a 4-byte id, here a contentId (Apicurio's
    /// `as-confluent` with `use-id=contentId`; Apicurio's ccompat API answers contentIds).
    Prefix4Content,
    /// Confluent's JsonSchemaConverter on pgoutbox's side against Connect's JsonConverter without
    /// schemas on the other: the magic byte and 4-byte id are taken off the value (a JSON text never
    /// starts with byte 0), so the bodies compare with Connect's bytes; the schemas are not compared
    /// (Connect registers none).
    JsonSchemaBody,
    /// Apicurio's ExtJsonConverter: `{"schemaId":<globalId>,"payload":...}`.
    ExtJson,
}

/// The suite's registry (`http://127.0.0.1:PORT`).
pub fn url() -> String {
    std::env::var("PGOUTBOX_TEST_REGISTRY").unwrap_or_else(|_| {
        panic!("PGOUTBOX_TEST_REGISTRY is not set: run the tests through scripts/test.sh, which starts the schema registry (or scripts/registry.sh start DIR)")
    })
}

/// A property line with `{registry}` replaced by the registry's URL.
pub fn fill(line: &str) -> String {
    if line.contains("{registry}") {
        line.replace("{registry}", &url())
    } else {
        line.to_string()
    }
}

/// GET on the registry: the status and body.
pub fn get(path: &str) -> (u16, Vec<u8>) {
    let base = url();
    let addr = base.trim_start_matches("http://").trim_end_matches('/').to_string();
    let Ok(mut s) = std::net::TcpStream::connect(&addr) else { return (0, Vec::new()) };
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let req = format!("GET {path} HTTP/1.0\r\nhost: {addr}\r\naccept: */*\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return (0, Vec::new());
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").map_or(raw.len(), |i| i + 4);
    let head = String::from_utf8_lossy(&raw[..split]);
    let code = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, raw[split..].to_vec())
}

fn schema_by(kind: &str, id: u64) -> String {
    let (code, body) = get(&format!("/apis/registry/v2/ids/{kind}/{id}"));
    if code != 200 {
        return format!("<no schema for {kind} {id}: HTTP {code}>");
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The record with every schema id replaced by `<schema …>` holding the schema it names.
pub fn resolve(ids: Ids, record: &mut ConsumedRecord) {
    let prefixed = |bytes: &mut Option<Vec<u8>>| {
        let Some(b) = bytes.as_mut() else { return };
        let (len, kind) = match ids {
            Ids::Prefix8Global => (8, "globalIds"),
            Ids::Prefix4Content => (4, "contentIds"),
            Ids::ExtJson => {
                let head = b"{\"schemaId\":";
                if let Some(rest) = b.strip_prefix(&head[..]) {
                    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
                    if let Ok(id) = std::str::from_utf8(&rest[..digits]).unwrap_or("").parse::<u64>() {
                        let mut out = head.to_vec();
                        out.extend_from_slice(format!("<schema {}>", schema_by("globalIds", id)).as_bytes());
                        out.extend_from_slice(&rest[digits..]);
                        *b = out;
                    }
                }
                return;
            }
            Ids::JsonSchemaBody => {
                if b.len() >= 5 && b[0] == 0 {
                    b.drain(..5);
                }
                return;
            }
            Ids::Headers => return,
        };
        if b.len() < 1 + len || b[0] != 0 {
            return;
        }
        let id = b[1..1 + len].iter().fold(0u64, |n, x| (n << 8) | u64::from(*x));
        let mut out = format!("<schema {}>", schema_by(kind, id)).into_bytes();
        out.extend_from_slice(&b[1 + len..]);
        *b = out;
    };
    prefixed(&mut record.key);
    prefixed(&mut record.value);
    for (name, value) in &mut record.headers {
        let kind = if name.ends_with(".globalId") {
            "globalIds"
        } else if name.ends_with(".contentId") {
            "contentIds"
        } else {
            continue;
        };
        if !name.starts_with("apicurio.") {
            continue;
        }
        if let Some(v) = value.as_mut().filter(|v| v.len() == 8) {
            let id = u64::from_be_bytes(v[..8].try_into().unwrap());
            *v = format!("<schema {}>", schema_by(kind, id)).into_bytes();
        }
    }
}

/// The schemas registered under an artifact (a subject) of `group`, oldest first; empty when there
/// is none.
pub fn versions(group: &str, artifact: &str) -> Vec<String> {
    let (code, body) = get(&format!("/apis/registry/v2/groups/{group}/artifacts/{artifact}/versions?limit=100"));
    if code != 200 {
        return Vec::new();
    }
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let mut numbers: Vec<u64> = v["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x["version"].as_str().and_then(|s| s.parse().ok()))
        .collect();
    numbers.sort();
    numbers
        .into_iter()
        .map(|n| {
            let (_, body) = get(&format!("/apis/registry/v2/groups/{group}/artifacts/{artifact}/versions/{n}"));
            String::from_utf8_lossy(&body).into_owned()
        })
        .collect()
}

/// Differences between the subjects each side registered for the case's topics (Apicurio's, in
/// `group`; an explicit group must hold them, so that two sides registering elsewhere still fail).
pub fn compare_subjects(topics: &[String], debezium_prefix: &str, pgoutbox_prefix: &str, group: &str) -> Vec<String> {
    let mut problems = Vec::new();
    // Within Apicurio's check period a schema found for one topic is written on another with
    // nothing registered there, so a topic's subject may be empty on both sides; not every one.
    let mut registered = (0, 0);
    for topic in topics {
        for part in ["key", "value"] {
            let d = versions(group, &format!("{debezium_prefix}.{topic}-{part}"));
            let p = versions(group, &format!("{pgoutbox_prefix}.{topic}-{part}"));
            registered.0 += d.len();
            registered.1 += p.len();
            if d != p {
                problems.push(format!(
                    "subject {topic}-{part}: Connect + Debezium registered {} version(s), pgoutbox {}:\n  Debezium: {d:?}\n  pgoutbox: {p:?}",
                    d.len(),
                    p.len()
                ));
            }
        }
    }
    if group != "default" && (registered.0 == 0 || registered.1 == 0) {
        problems.push(format!(
            "nothing registered in group `{group}` (Connect + Debezium: {} versions, pgoutbox: {})",
            registered.0, registered.1
        ));
    }
    problems
}
