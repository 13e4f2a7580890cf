//! What a connector's configuration may change of the worker's: Connect's boundary between the
//! worker's properties (its Kafka clients, their credentials, its config providers) and a
//! connector's, which whoever reaches the REST API writes.
//!
//! - Config providers are the worker's alone: a connector may reference them (`${file:...}`),
//!   never declare one (a declared directory provider would read any file the worker can).
//! - The worker's Kafka client keys (`bootstrap.servers`, `security.protocol`, `sasl.*`, `ssl.*`,
//!   `producer.*`, ...) are not a connector's to set: as in Connect, a connector changes its
//!   clients only through `producer.override.*` (and `admin.override.*`, `consumer.override.*`),
//!   as far as the worker's `connector.client.config.override.policy` allows.
//!
//! - A connector gets of the worker's properties only what a Connect worker gives its connectors
//!   ([`is_inherited`]): the Kafka clients' settings, the converters as defaults, the config
//!   providers, and the worker-level settings of the connector's run (offsets topic, shutdown
//!   timeout, topic creation). Connector keys (`database.*`, `slot.name`, `transforms`, ...) come
//!   from the connector's own configuration alone: a `database.password` in the worker's file is
//!   never sent to a `database.hostname` a REST caller chose.
//!
//! The policy's default is Connect's, `All`, which lets a connector point the worker's
//! credentials at another cluster (`producer.override.bootstrap.servers` with the worker's
//! `sasl.jaas.config`): docs/operations.md says so, and the container and the quickstart ship
//! `None`.

use std::collections::BTreeMap;

use crate::config::providers::is_provider_key;
use crate::config::ConfigError;

pub const POLICY_KEY: &str = "connector.client.config.override.policy";
/// Kafka 4.x's allowlist policy (KIP-1188) reads its list here.
pub const ALLOWLIST_KEY: &str = "connector.client.config.override.allowlist";

const OVERRIDE_PREFIXES: &[&str] = &["producer.override.", "consumer.override.", "admin.override."];

/// `connector.client.config.override.policy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverridePolicy {
    /// No client key may be overridden.
    None,
    /// Only the client's identity: `security.protocol`, `sasl.jaas.config`, `sasl.mechanism`.
    Principal,
    /// Any client key (Connect's default).
    All,
    /// The keys listed in `connector.client.config.override.allowlist`.
    Allowlist(Vec<String>),
}

impl OverridePolicy {
    pub fn from_props(props: &BTreeMap<String, String>) -> Result<OverridePolicy, ConfigError> {
        let get = |k: &str| props.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let name = get(POLICY_KEY).unwrap_or("All");
        // Connect takes the short name or the class (org.apache.kafka.connect.connector.policy.*).
        let short = name.rsplit('.').next().unwrap_or(name).trim_end_matches("ConnectorClientConfigOverridePolicy");
        Ok(match short.to_ascii_lowercase().as_str() {
            "none" => OverridePolicy::None,
            "principal" => OverridePolicy::Principal,
            "all" => OverridePolicy::All,
            "allowlist" => OverridePolicy::Allowlist(
                get(ALLOWLIST_KEY)
                    .unwrap_or("")
                    .split(',')
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                    .map(str::to_string)
                    .collect(),
            ),
            _ => {
                return Err(ConfigError::invalid(
                    POLICY_KEY,
                    "is not a policy pgoutbox knows; use None, Principal, All or Allowlist (with connector.client.config.override.allowlist)",
                ))
            }
        })
    }

    fn name(&self) -> &'static str {
        match self {
            OverridePolicy::None => "None",
            OverridePolicy::Principal => "Principal",
            OverridePolicy::All => "All",
            OverridePolicy::Allowlist(_) => "Allowlist",
        }
    }

    fn allows(&self, client_key: &str) -> bool {
        match self {
            OverridePolicy::None => false,
            OverridePolicy::Principal => {
                ["security.protocol", "sasl.jaas.config", "sasl.mechanism"].contains(&client_key)
            }
            OverridePolicy::All => true,
            OverridePolicy::Allowlist(keys) => keys.iter().any(|k| k == client_key),
        }
    }

    /// Every key of a connector's configuration that the policy does not allow, with the message
    /// Connect gives for it.
    pub fn violations(&self, config: &BTreeMap<String, String>) -> Vec<(String, String)> {
        config
            .keys()
            .filter_map(|k| {
                let client_key = OVERRIDE_PREFIXES.iter().find_map(|p| k.strip_prefix(p))?;
                (!self.allows(client_key)).then(|| {
                    (
                        k.clone(),
                        format!(
                            "The '{}' policy does not allow '{client_key}' to be overridden in the connector configuration.",
                            self.name()
                        ),
                    )
                })
            })
            .collect()
    }
}

/// Keys that belong to the worker, which a connector's configuration cannot change: the worker's
/// Kafka clients and their credentials (a connector overrides them with `producer.override.*`
/// under the policy), and its config providers.
pub fn is_worker_client_key(key: &str) -> bool {
    if OVERRIDE_PREFIXES.iter().any(|p| key.starts_with(p)) {
        return false;
    }
    const EXACT: &[&str] = &["bootstrap.servers", "client.dns.lookup", "security.protocol", POLICY_KEY, ALLOWLIST_KEY];
    EXACT.contains(&key)
        || ["sasl.", "ssl.", "producer.", "consumer.", "admin."].iter().any(|p| key.starts_with(p))
        || is_provider_key(key)
}

/// Keys of the worker's properties a connector's configuration is built on, as a Connect worker
/// passes them: its Kafka clients' settings (`bootstrap.servers`, `security.*`, `sasl.*`, `ssl.*`,
/// `producer.*`, `admin.*`, `consumer.*`), the converters with their settings (defaults a connector's
/// own converter replaces), the config providers (a connector's references resolve through them),
/// and the worker-level settings pgoutbox reads from a connector's config: the offsets topic and
/// flush interval, the shutdown timeout, topic creation on or off. (`exactly.once.source.support`
/// and `group.id` are the worker's too, passed by `Worker::effective` on its own terms.)
pub fn is_inherited(key: &str) -> bool {
    const CLIENT_EXACT: &[&str] = &["bootstrap.servers", "client.dns.lookup"];
    const CLIENT_PREFIXES: &[&str] = &["security.", "sasl.", "ssl.", "producer.", "admin.", "consumer."];
    const CONVERTERS: &[&str] = &["key.converter", "value.converter", "header.converter"];
    const WORKER_SETTINGS: &[&str] = &[
        "offset.storage.topic",
        "offset.flush.interval.ms",
        "offset.flush.timeout.ms",
        "task.shutdown.graceful.timeout.ms",
        "topic.creation.enable",
    ];
    // The REST server's admin listener is not a client's.
    let admin_listener = key == "admin.listeners" || key.starts_with("admin.listeners.");
    let client = !admin_listener
        && !OVERRIDE_PREFIXES.iter().any(|p| key.starts_with(p))
        && (CLIENT_EXACT.contains(&key) || CLIENT_PREFIXES.iter().any(|p| key.starts_with(p)));
    let converter =
        CONVERTERS.iter().any(|c| key.strip_prefix(c).is_some_and(|rest| rest.is_empty() || rest.starts_with('.')));
    client || converter || is_provider_key(key) || WORKER_SETTINGS.contains(&key)
}

/// Whether a worker property is one of the connector keys pgoutbox knows (`database.*`, `slot.name`,
/// `transforms`, ...): no connector receives it from the worker, which is worth a warning, since
/// pgoutbox before 2026-12 passed every worker key on.
pub fn is_connector_key(key: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "database.",
        "table.",
        "schema.",
        "column.",
        "slot.",
        "publication.",
        "snapshot.",
        "transforms",
        "predicates",
        "pgoutbox.",
        "message.prefix.",
        "errors.",
        "topic.prefix",
        "topic.delimiter",
        "topic.naming.strategy",
        "topic.heartbeat.",
        "topic.creation.default.",
    ];
    const EXACT: &[&str] = &["connector.class", "plugin.name", "heartbeat.action.query", "tasks.max", "converters"];
    EXACT.contains(&key) || PREFIXES.iter().any(|p| key.starts_with(p))
}

/// Checks a connector's own configuration against the worker's boundary: a declared provider is
/// an error (it would read the worker's files), so is a client override the policy forbids.
pub fn check(policy: &OverridePolicy, config: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    if let Some(k) = config.keys().find(|k| is_provider_key(k)) {
        return Err(ConfigError::invalid(
            k,
            "config providers are declared by the worker (in its properties file), as in Connect; a connector may only reference them, e.g. ${file:/path/secrets.properties:password}",
        ));
    }
    match policy.violations(config).into_iter().next() {
        Some((key, message)) => Err(ConfigError::invalid(
            &key,
            format!("{message} Set {POLICY_KEY} on the worker to allow it, or remove the key"),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn policy_defaults_to_connects_all_and_reads_every_name() {
        assert_eq!(OverridePolicy::from_props(&map(&[])).unwrap(), OverridePolicy::All);
        for (name, want) in [
            ("None", OverridePolicy::None),
            ("principal", OverridePolicy::Principal),
            ("org.apache.kafka.connect.connector.policy.NoneConnectorClientConfigOverridePolicy", OverridePolicy::None),
        ] {
            assert_eq!(OverridePolicy::from_props(&map(&[(POLICY_KEY, name)])).unwrap(), want, "{name}");
        }
        let allow = OverridePolicy::from_props(&map(&[(POLICY_KEY, "Allowlist"), (ALLOWLIST_KEY, "linger.ms, acks")]));
        assert_eq!(allow.unwrap(), OverridePolicy::Allowlist(vec!["linger.ms".into(), "acks".into()]));
        let bad = OverridePolicy::from_props(&map(&[(POLICY_KEY, "Zq9Mark")])).unwrap_err().to_string();
        assert!(bad.contains(POLICY_KEY) && !bad.contains("Zq9Mark"), "{bad}");
    }

    #[test]
    fn policy_refuses_what_it_does_not_allow_with_connects_message() {
        let c = map(&[
            ("producer.override.bootstrap.servers", "evil:9092"),
            ("producer.override.sasl.jaas.config", "x"),
            ("database.hostname", "db"),
        ]);
        assert!(OverridePolicy::All.violations(&c).is_empty());
        let principal = OverridePolicy::Principal.violations(&c);
        assert_eq!(principal.len(), 1);
        assert_eq!(principal[0].0, "producer.override.bootstrap.servers");
        assert_eq!(
            principal[0].1,
            "The 'Principal' policy does not allow 'bootstrap.servers' to be overridden in the connector configuration."
        );
        assert_eq!(OverridePolicy::None.violations(&c).len(), 2);
        let allow = OverridePolicy::Allowlist(vec!["bootstrap.servers".into()]);
        assert_eq!(allow.violations(&c).len(), 1);
    }

    #[test]
    fn connectors_cannot_declare_providers_or_set_worker_client_keys() {
        let declared = map(&[("config.providers", "d"), ("config.providers.d.class", "x")]);
        let e = check(&OverridePolicy::All, &declared).unwrap_err().to_string();
        assert!(e.contains("config.providers") && e.contains("worker"), "{e}");
        for k in [
            "bootstrap.servers",
            "security.protocol",
            "sasl.jaas.config",
            "ssl.truststore.location",
            "producer.acks",
            "config.providers.f.class",
        ] {
            assert!(is_worker_client_key(k), "{k}");
        }
        for k in ["producer.override.acks", "database.hostname", "topic.prefix", "key.converter", "transforms"] {
            assert!(!is_worker_client_key(k), "{k}");
        }
    }

    #[test]
    fn connectors_inherit_the_workers_clients_converters_and_providers_only() {
        for k in [
            "bootstrap.servers",
            "security.protocol",
            "sasl.jaas.config",
            "ssl.truststore.location",
            "producer.linger.ms",
            "admin.ssl.keystore.location",
            "consumer.max.poll.records",
            "key.converter",
            "value.converter.schemas.enable",
            "header.converter",
            "config.providers",
            "config.providers.file.param.allowed.paths",
            "offset.storage.topic",
            "task.shutdown.graceful.timeout.ms",
            "topic.creation.enable",
        ] {
            assert!(is_inherited(k), "{k}");
        }
        for k in [
            "database.hostname",
            "database.user",
            "database.password",
            "database.sslkey",
            "slot.name",
            "publication.name",
            "table.include.list",
            "topic.prefix",
            "transforms",
            "transforms.outbox.type",
            "predicates",
            "errors.tolerance",
            "topic.creation.default.partitions",
            "pgoutbox.relay",
            "pgoutbox.stall.threshold.ms",
            "heartbeat.action.query",
            "snapshot.mode",
            "name",
            "admin.listeners",
            "listeners",
            "rest.advertised.host.name",
            "producer.override.bootstrap.servers",
            POLICY_KEY,
            "key.converterx",
            "group.id",
            "exactly.once.source.support",
        ] {
            assert!(!is_inherited(k), "{k}");
        }
    }
}
