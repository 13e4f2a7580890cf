//! The connector's ConfigDef as Connect's REST API describes it: `GET
//! /connector-plugins/{plugin}/config` and the `configs` of `PUT .../config/validate`.
//!
//! `configdef.json` holds each key's definition as Kafka Connect 4.4 with Debezium 3.7.1.Final's
//! PostgreSQL connector answers it (name, type, default, importance, group, order, width, display
//! name, dependents, the values it recommends, and whether it shows), the connector's keys first and
//! Connect's own connector keys (`Common`, `Transforms`, ... `offsets.topic`) last. The
//! documentation is pgoutbox's: what it does with the key.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde_json::{json, Value};

/// The groups of Connect's own connector keys, which validate lists first.
const CONNECT_GROUPS: [&str; 7] =
    ["Common", "Transforms", "Predicates", "Error Handling", "Topic Creation", "Exactly Once Support", "offsets.topic"];

static DEFINITIONS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    let defs: Vec<Value> = serde_json::from_str(include_str!("configdef.json")).expect("configdef.json is valid JSON");
    defs.into_iter().map(documented).collect()
});

/// A definition with pgoutbox's documentation of the key.
fn documented(mut def: Value) -> Value {
    let name = def["name"].as_str().unwrap_or_default().to_string();
    let doc = match crate::config::ignored_reason(&name) {
        Some(reason) => format!("pgoutbox accepts this key and does not act on it: {reason}."),
        None => "A key of Debezium's PostgreSQL connector or of Connect: docs/compatibility.md says whether and how pgoutbox honours it.".to_string(),
    };
    if let Some(o) = def.as_object_mut() {
        o.insert("documentation".into(), Value::String(doc));
    }
    def
}

fn is_connect_key(def: &Value) -> bool {
    def["group"].as_str().is_some_and(|g| CONNECT_GROUPS.contains(&g))
}

/// The definition as the REST API shows it: without the validation-only fields.
fn shown(def: &Value) -> Value {
    let mut def = def.clone();
    if let Some(o) = def.as_object_mut() {
        o.remove("recommended_values");
        o.remove("visible");
    }
    def
}

/// `GET /connector-plugins/{plugin}/config`: every key, the connector's first.
pub fn definitions() -> Vec<Value> {
    DEFINITIONS.iter().map(shown).collect()
}

/// Connect's type check of a value, with its message (`ConfigDef.parseType`).
fn type_error(kind: &str, value: &str) -> Option<&'static str> {
    let v = value.trim();
    let ok = match kind {
        "INT" => v.parse::<i32>().is_ok(),
        "SHORT" => v.parse::<i16>().is_ok(),
        "LONG" => v.parse::<i64>().is_ok(),
        "DOUBLE" => v.parse::<f64>().is_ok(),
        "BOOLEAN" => v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false"),
        _ => true,
    };
    match (ok, kind) {
        (true, _) => None,
        (false, "INT") => Some("Not a number of type INT"),
        (false, "SHORT") => Some("Not a number of type SHORT"),
        (false, "LONG") => Some("Not a number of type LONG"),
        (false, "DOUBLE") => Some("Not a number of type DOUBLE"),
        (false, _) => Some("Expected value to be either true or false"),
    }
}

/// What validate reports of the worker: the plugins it provides, with their versions, and the
/// converters a connector gets when it names none.
pub struct Worker<'a> {
    /// `connector.plugin.version` and the converters' `*.plugin.version`, each with its version.
    pub plugin_versions: &'a [(&'a str, &'a str)],
    /// `key.converter`, `value.converter`, `header.converter`: the worker's.
    pub converter_defaults: &'a [(&'a str, &'a str)],
    /// Classes, by Connect's plugin type (`converter`, `header_converter`, `transformation`), and
    /// their versions.
    pub plugins: &'a [(&'a str, &'a str, &'a str)],
}

impl Worker<'_> {
    fn classes(&self, kind: &str) -> Value {
        let mut out: Vec<&str> = self.plugins.iter().filter(|(_, k, _)| *k == kind).map(|(c, ..)| *c).collect();
        out.sort();
        json!(out)
    }
}

/// The Event Router's ConfigDef (its keys after `transforms.<alias>.`; group `Table`, `Router` or
/// `Tracing`), as Connect lists it under a connector's transform.
static EVENT_ROUTER: LazyLock<Vec<Value>> = LazyLock::new(|| {
    serde_json::from_str(include_str!("eventrouter_configdef.json")).expect("eventrouter_configdef.json is valid JSON")
});

/// A definition Connect makes up for a key no ConfigDef lists (importance MEDIUM, width NONE, no
/// default); callers set what differs.
fn definition(name: &str, kind: &str, group: &str, order: i64, display: &str) -> Value {
    json!({"name": name, "type": kind, "required": false, "default_value": Value::Null, "importance": "MEDIUM",
           "documentation": "", "group": group, "order_in_group": order, "width": "NONE", "display_name": display, "dependents": []})
}

/// `def` with `fields` replaced.
fn with(mut def: Value, fields: &[(&str, Value)]) -> Value {
    for (k, v) in fields {
        def[*k] = v.clone();
    }
    def
}

/// One entry of validate's answer before its value is filled in.
struct Described {
    def: Value,
    /// Whether the value shown is the one given (or the default), as for Connect's own keys; the
    /// connector's (Debezium's validation) show none.
    shows_value: bool,
    recommended: Value,
    visible: bool,
    errors: Vec<String>,
}

impl Described {
    /// A key of Connect's or a transform's: shown with its value, visible, no errors yet.
    fn connect_key(def: Value, recommended: Value) -> Described {
        Described { def, shows_value: true, recommended, visible: true, errors: Vec::new() }
    }
}

/// The transforms' keys as Connect lists them: per alias its type, version, negate and predicate,
/// then the Event Router's ConfigDef for an Event Router, else the alias's keys given.
fn transform_entries(
    config: &BTreeMap<String, String>,
    worker: &Worker<'_>,
    groups: &mut Vec<String>,
) -> Vec<Described> {
    let mut out = Vec::new();
    let aliases = config
        .get("transforms")
        .map(|t| t.split(',').map(str::trim).filter(|a| !a.is_empty()).collect::<Vec<_>>())
        .unwrap_or_default();
    for alias in aliases {
        let group = format!("Transforms: {alias}");
        groups.push(group.clone());
        let prefix = format!("transforms.{alias}.");
        let class = config.get(&format!("{prefix}type")).map(String::as_str);
        let version = class.and_then(|c| worker.plugins.iter().find(|(p, ..)| *p == c)).map(|(.., v)| *v);
        let long_high = |def: Value| with(def, &[("importance", json!("HIGH")), ("width", json!("LONG"))]);
        let type_def = long_high(definition(
            &format!("{prefix}type"),
            "CLASS",
            &group,
            0,
            &format!("Transformation type for {alias}"),
        ));
        let version_def = long_high(definition(
            &format!("{prefix}plugin.version"),
            "STRING",
            &group,
            1,
            &format!("Transformation version for {alias}"),
        ));
        let generic = [
            (with(type_def, &[("required", json!(true))]), worker.classes("transformation")),
            (with(version_def, &[("default_value", json!(version))]), json!(version.into_iter().collect::<Vec<_>>())),
            (
                with(
                    definition(&format!("{prefix}negate"), "BOOLEAN", &group, 2, "negate"),
                    &[("default_value", json!("false"))],
                ),
                json!([]),
            ),
            (definition(&format!("{prefix}predicate"), "STRING", &group, 3, "predicate"), json!([])),
        ];
        for (def, recommended) in generic {
            out.push(Described::connect_key(def, recommended));
        }
        if class == Some(crate::outbox::EVENT_ROUTER_CLASS) {
            for d in EVENT_ROUTER.iter() {
                let mut def = d.clone();
                let sub = format!("{group}: {}", d["group"].as_str().unwrap_or_default());
                if !groups.contains(&sub) {
                    groups.push(sub.clone());
                }
                def["name"] = json!(format!("{prefix}{}", d["name"].as_str().unwrap_or_default()));
                def["group"] = json!(sub);
                def["documentation"] = json!("");
                out.push(Described::connect_key(def, json!([])));
            }
        }
        for k in config.keys().filter(|k| k.starts_with(&prefix)) {
            if !out.iter().any(|d| d.def["name"] == k.as_str()) {
                let def = definition(k, "STRING", &group, -1, k);
                out.push(Described::connect_key(def, json!([])));
            }
        }
    }
    out
}

/// `PUT /connector-plugins/{plugin}/config/validate`: Connect's ConfigInfos over the whole
/// ConfigDef: Connect's keys first (the value given, secrets hidden, or the default), then the
/// transforms' (`transform_entries`), then the connector's (with no value, as Connect shows
/// Debezium's); type errors, and `problem`, the error pgoutbox would start with, on the key it
/// names (on a `connector` entry when it names none).
pub fn validate(
    config: &BTreeMap<String, String>,
    problem: Option<(Option<String>, String)>,
    shown_value: impl Fn(&str, &str) -> String,
    worker: &Worker<'_>,
) -> Value {
    let mut groups: Vec<String> = CONNECT_GROUPS.iter().map(|g| g.to_string()).collect();
    let (connect, connector): (Vec<&Value>, Vec<&Value>) = DEFINITIONS.iter().partition(|d| is_connect_key(d));
    let mut described = Vec::new();
    for def in connect {
        let name = def["name"].as_str().unwrap_or_default();
        let mut def = shown(def);
        let mut recommended = DEFINITIONS
            .iter()
            .find(|d| d["name"] == name)
            .and_then(|d| d.get("recommended_values").cloned())
            .unwrap_or_else(|| json!([]));
        if let Some((_, version)) = worker.plugin_versions.iter().find(|(k, _)| *k == name) {
            def["default_value"] = json!(version);
            recommended = json!([version]);
        }
        if let Some((_, class)) = worker.converter_defaults.iter().find(|(k, _)| *k == name) {
            def["default_value"] = json!(class);
            recommended = worker.classes(if name == "header.converter" { "header_converter" } else { "converter" });
        }
        described.push(Described::connect_key(def, recommended));
    }
    described.extend(transform_entries(config, worker, &mut groups));
    for def in connector {
        if let Some(g) = def["group"].as_str() {
            if !groups.iter().any(|o| o == g) {
                groups.push(g.to_string());
            }
        }
        let recommended = def.get("recommended_values").cloned().unwrap_or_else(|| json!([]));
        let visible = def.get("visible").and_then(Value::as_bool).unwrap_or(true);
        described.push(Described { def: shown(def), shows_value: false, recommended, visible, errors: Vec::new() });
    }
    let mut placed = false;
    for d in &mut described {
        let name = d.def["name"].as_str().unwrap_or_default().to_string();
        if d.shows_value && d.def["required"] == true && d.def["default_value"].is_null() && !config.contains_key(&name)
        {
            d.errors.push(format!("Missing required configuration \"{name}\" which has no default value."));
        }
        if let Some(v) = config.get(&name) {
            if let Some(e) = d.def["type"].as_str().and_then(|t| type_error(t, v)) {
                d.errors.push(format!("Invalid value {v} for configuration {name}: {e}"));
            }
        }
        if let Some((Some(key), message)) = &problem {
            if *key == name && !d.errors.contains(message) {
                d.errors.push(message.clone());
                placed = true;
            }
        }
    }
    if let Some((key, message)) = problem.filter(|_| !placed) {
        let name = key.unwrap_or_else(|| "connector".to_string());
        let def =
            with(definition(&name, "STRING", "", -1, &name), &[("importance", json!("HIGH")), ("group", Value::Null)]);
        described.push(Described {
            def,
            shows_value: false,
            recommended: json!([]),
            visible: true,
            errors: vec![message],
        });
    }
    let error_count: usize = described.iter().map(|d| d.errors.len()).sum();
    let configs: Vec<Value> = described
        .into_iter()
        .map(|d| {
            let name = d.def["name"].as_str().unwrap_or_default().to_string();
            let value = match d.shows_value {
                true => config.get(&name).map(|v| Value::String(shown_value(&name, v))).unwrap_or_else(|| d.def["default_value"].clone()),
                false => Value::Null,
            };
            json!({
                "definition": d.def,
                "value": {"name": name, "value": value, "recommended_values": d.recommended, "errors": d.errors, "visible": d.visible}
            })
        })
        .collect();
    json!({"name": crate::config::POSTGRES_CONNECTOR_CLASS, "error_count": error_count, "groups": groups, "configs": configs})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configdef_lists_the_connectors_keys_then_connects() {
        let defs = definitions();
        assert_eq!(defs.len(), 165);
        assert_eq!(defs[0]["name"], "database.hostname");
        assert_eq!(defs[0]["group"], "CONNECTION");
        assert_eq!(defs.last().unwrap()["name"], "offsets.storage.topic");
        let port = defs.iter().find(|d| d["name"] == "database.port").unwrap();
        assert_eq!((port["type"].as_str(), port["default_value"].as_str()), (Some("INT"), Some("5432")));
        assert!(port.get("visible").is_none() && port.get("recommended_values").is_none(), "{port}");
        let ignored = defs.iter().find(|d| d["name"] == "xmin.fetch.interval.ms").unwrap();
        assert!(ignored["documentation"]
            .as_str()
            .unwrap()
            .contains("does not act on it: pgoutbox does not track xmin"));
    }

    #[test]
    fn validate_covers_the_whole_configdef_with_every_error() {
        let config: BTreeMap<String, String> = [
            ("connector.class", "io.debezium.connector.postgresql.PostgresConnector"),
            ("database.port", "abc"),
            ("database.password", "secret"),
            ("transforms", "outbox"),
            ("transforms.outbox.type", "io.debezium.transforms.outbox.EventRouter"),
            ("transforms.outbox.route.by.field", "kind"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let problem = Some((
            Some("topic.prefix".to_string()),
            "The 'topic.prefix' value is invalid: A value is required".to_string(),
        ));
        let plugins = [
            ("io.debezium.transforms.outbox.EventRouter", "transformation", "3.6.3.Final"),
            ("org.apache.kafka.connect.json.JsonConverter", "converter", "4.3.0"),
        ];
        let worker = Worker {
            plugin_versions: &[("connector.plugin.version", "3.6.3.Final")],
            converter_defaults: &[("key.converter", "org.apache.kafka.connect.json.JsonConverter")],
            plugins: &plugins,
        };
        let answer = validate(
            &config,
            problem,
            |k, v| if k.contains("password") { "[hidden]".into() } else { v.into() },
            &worker,
        );
        let configs = answer["configs"].as_array().unwrap();
        assert_eq!(configs.len(), 165 + 4 + 19, "the ConfigDef, the transform's four keys and the Event Router's");
        assert_eq!(configs[0]["definition"]["name"], "name", "Connect's keys first");
        assert_eq!(configs[24]["definition"]["name"], "transforms.outbox.type", "then the transforms'");
        assert_eq!(configs[47]["definition"]["name"], "database.hostname", "then the connector's");
        assert_eq!(answer["groups"][7], "Transforms: outbox");
        assert_eq!(answer["groups"][8], "Transforms: outbox: Table");
        assert_eq!(answer["groups"][0], "Common");
        assert_eq!(answer["error_count"], 3, "name missing, a bad port, no topic.prefix");
        assert_eq!(
            configs[0]["value"]["errors"][0],
            "Missing required configuration \"name\" which has no default value."
        );
        let value = |k: &str| configs.iter().find(|c| c["definition"]["name"] == k).unwrap()["value"].clone();
        assert_eq!(
            value("database.port")["errors"][0],
            "Invalid value abc for configuration database.port: Not a number of type INT"
        );
        assert_eq!(value("topic.prefix")["errors"][0], "The 'topic.prefix' value is invalid: A value is required");
        assert_eq!(value("database.password")["value"], Value::Null, "as Connect shows the connector's keys");
        assert_eq!(value("connector.class")["value"], "io.debezium.connector.postgresql.PostgresConnector");
        assert_eq!(value("tasks.max")["value"], "1", "a Connect key's default");
        assert_eq!(value("connector.plugin.version")["recommended_values"], json!(["3.6.3.Final"]));
        assert_eq!(value("plugin.name")["recommended_values"], json!(["decoderbufs", "pgoutput"]));
        assert_eq!(value("transforms.outbox.route.by.field")["value"], "kind", "the router's key, as given");
        assert_eq!(value("transforms.outbox.table.field.event.id")["value"], "id", "the router's key, its default");
        assert_eq!(value("transforms.outbox.plugin.version")["value"], "3.6.3.Final");
        assert_eq!(value("key.converter")["value"], "org.apache.kafka.connect.json.JsonConverter");
    }
}
