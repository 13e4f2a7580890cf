//! The connector's transform chain (`transforms=a,b,c`), as a Connect worker applies it: in order,
//! each transform only where its predicate (`transforms.<alias>.predicate`, `.negate`) says so.
//!
//! The Event Router is one of the aliases. Transforms after it see its records, exactly as in
//! Connect. Before it a record is Debezium's change event of the outbox table, which pgoutbox
//! never builds: only transforms that leave what the router reads unchanged can run there (header
//! transforms, `Filter`, the tracing transform); the others are refused at start with the reason.

use std::collections::BTreeMap;

use crate::connect::record::Record;
use crate::connect::transforms::{self, Predicate, Transform, TransformError};
use crate::connect::{ConfigError, Reader};

use super::EVENT_ROUTER_CLASS;
use crate::debezium::message::DECODE_CONTENT_CLASS;
use crate::debezium::transforms::{self as dbz, HeaderToValue};

pub const TRACING_CLASS: &str = "io.debezium.transforms.tracing.ActivateTracingSpan";

/// What a step does.
#[derive(Debug, Clone)]
enum Kind {
    Kafka(Transform),
    HeaderToValue(HeaderToValue),
    /// Passes records through unchanged (the tracing transform; Debezium's envelope transforms,
    /// which leave the router's records alone).
    Pass,
}

/// One transform of the chain, with its predicate.
#[derive(Debug, Clone)]
pub struct Step {
    pub alias: String,
    pub class: String,
    kind: Kind,
    predicate: Option<(Predicate, bool)>,
}

impl Step {
    fn applies(&self, r: &Record) -> bool {
        match &self.predicate {
            None => true,
            Some((p, negate)) => p.test(r) != *negate,
        }
    }

    /// The record after this step; `None` when it is dropped.
    pub fn apply(&self, r: Record) -> Result<Option<Record>, TransformError> {
        if !self.applies(&r) {
            return Ok(Some(r));
        }
        match &self.kind {
            Kind::Kafka(t) => t.apply(r),
            Kind::HeaderToValue(t) => t.apply(r),
            Kind::Pass => Ok(Some(r)),
        }
    }
}

/// The chain around the Event Router.
#[derive(Debug, Clone, Default)]
pub struct Chain {
    /// The Event Router's alias.
    pub router_alias: String,
    /// The Event Router's predicate, if any.
    pub router_gate: Option<Gate>,
    /// Before the router: header transforms, Filter, tracing.
    pub before: Vec<Step>,
    /// After the router, in order.
    pub after: Vec<Step>,
    /// Warnings for the operator (the tracing transform passes records through).
    pub warnings: Vec<String>,
    /// `DecodeLogicalDecodingMessageContent` before the router: logical decoding messages are
    /// outbox events too (the message outbox).
    pub decode: Option<DecodeMessages>,
}

/// The message outbox's transform, `DecodeLogicalDecodingMessageContent`, before the Event Router.
#[derive(Debug, Clone)]
pub struct DecodeMessages {
    pub alias: String,
    /// `fields.null.include`: JSON nulls are kept as optional bytes fields.
    pub null_include: bool,
    /// Its predicate, if any.
    pub gate: Option<Gate>,
}

/// A predicate on the Event Router or on `DecodeLogicalDecodingMessageContent`
/// (`transforms.<alias>.predicate`, `.negate`), as Debezium's documentation recommends to keep the
/// router to the outbox table's records. In Connect a record it does not match passes the
/// transform unchanged: the raw change event (or message) would be published. pgoutbox builds
/// only routed events, so such an event is an error naming the predicate, found at start where the
/// topic is known and otherwise at the event.
#[derive(Debug, Clone)]
pub struct Gate {
    /// The transform's alias.
    pub alias: String,
    /// The predicate's name (`predicates=<name>`).
    pub name: String,
    predicate: Predicate,
    negate: bool,
}

impl Gate {
    /// Whether the transform applies to `r`, the change event (or message record) as the
    /// transforms before it left it.
    pub fn admits(&self, r: &Record) -> bool {
        self.predicate.test(r) != self.negate
    }

    /// Whether the transform applies to every change event on `topic`, when that does not depend
    /// on headers. A change event always has a value (no tombstone).
    pub fn admits_topic(&self, topic: &str) -> Option<bool> {
        match &self.predicate {
            Predicate::TopicNameMatches(re) => Some(re.is_match(topic) != self.negate),
            Predicate::RecordIsTombstone => Some(self.negate),
            Predicate::HasHeaderKey(_) => None,
        }
    }

    /// Why an event on `topic` it does not admit cannot be relayed, and the fix.
    pub fn refusal(&self, topic: &str) -> (String, String) {
        let (alias, name) = (&self.alias, &self.name);
        let problem = format!("the predicate `{name}` of transform `{alias}` does not apply it to the record on `{topic}`: Debezium would pass that record on untransformed, which pgoutbox does not build (it relays only the Event Router's events)");
        let fix = match &self.predicate {
            Predicate::TopicNameMatches(_) if self.negate => format!("make predicates.{name}.pattern not match `{topic}`, or remove transforms.{alias}.predicate"),
            Predicate::TopicNameMatches(_) => format!("make predicates.{name}.pattern match `{topic}` (e.g. {}), or remove transforms.{alias}.predicate", topic.replace('.', "\\.")),
            Predicate::HasHeaderKey(h) => format!("make the transforms before `{alias}` {} the header `{h}`, or remove transforms.{alias}.predicate", if self.negate { "remove" } else { "add" }),
            Predicate::RecordIsTombstone => format!("set transforms.{alias}.negate=true (a change event is never a tombstone), or remove transforms.{alias}.predicate"),
        };
        (problem, fix)
    }

    /// A start-time refusal under `transforms.<alias>.predicate` for change events on `topic`.
    fn check(&self, topic: &str) -> Result<(), ConfigError> {
        match self.admits_topic(topic) {
            Some(false) => {
                let (problem, fix) = self.refusal(topic);
                Err(ConfigError::invalid(&format!("transforms.{}.predicate", self.alias), format!("{problem}; {fix}")))
            }
            _ => Ok(()),
        }
    }
}

impl Chain {
    /// Refuses at start a predicate on the router or the message transform that does not apply
    /// them to the change events of `tables` (`schema.table`, the captured tables whose names the
    /// include list spells out) or to the messages.
    /// `topic_of` names a table's change-event topic (`RouterConfig::data_change_topic`).
    pub fn check_gates(
        &self,
        topic_prefix: &str,
        topic_of: &dyn Fn(&str, &str) -> String,
        tables: &[String],
    ) -> Result<(), ConfigError> {
        if let Some(decode) = &self.decode {
            let topic = format!("{topic_prefix}.message");
            for gate in decode.gate.iter().chain(&self.router_gate) {
                gate.check(&topic)?;
            }
        }
        if let Some(gate) = &self.router_gate {
            for t in tables {
                // The include list matches any case: an unquoted table's name is its lower case.
                let topic = |t: &str| {
                    let (schema, table) = t.split_once('.').unwrap_or(("", t));
                    topic_of(schema, table)
                };
                if gate.admits_topic(&topic(&t.to_lowercase())) == Some(true) {
                    continue;
                }
                gate.check(&topic(t))?;
            }
        }
        Ok(())
    }
}

/// `transforms.<alias>.predicate` and `.negate`, against the parsed `predicates`.
fn parse_predicate(
    r: &mut Reader<'_>,
    alias: &str,
    predicates: &BTreeMap<String, Predicate>,
) -> Result<Option<(String, Predicate, bool)>, ConfigError> {
    let key = format!("transforms.{alias}.predicate");
    let Some(name) = r.str(&key).map(str::to_string) else { return Ok(None) };
    let p = predicates.get(&name).ok_or_else(|| {
        ConfigError::invalid(
            &key,
            format!("predicate `{name}` is not in `predicates` (or has no predicates.{name}.type)"),
        )
    })?;
    let negate = r.bool_or(&format!("transforms.{alias}.negate"), false)?;
    Ok(Some((name, p.clone(), negate)))
}

fn parse_gate(
    r: &mut Reader<'_>,
    alias: &str,
    predicates: &BTreeMap<String, Predicate>,
) -> Result<Option<Gate>, ConfigError> {
    Ok(parse_predicate(r, alias, predicates)?.map(|(name, predicate, negate)| Gate {
        alias: alias.to_string(),
        name,
        predicate,
        negate,
    }))
}

/// Applies `steps` in order; `Err` names the alias whose transform failed.
pub fn apply(steps: &[Step], mut r: Record) -> Result<Option<Record>, (String, TransformError)> {
    for s in steps {
        match s.apply(r).map_err(|e| (s.alias.clone(), e))? {
            Some(next) => r = next,
            None => return Ok(None),
        }
    }
    Ok(Some(r))
}

impl Chain {
    /// `transforms`, every `transforms.<alias>.type` and options, and the `predicates` they use.
    pub fn parse(r: &mut Reader<'_>) -> Result<Chain, ConfigError> {
        let hint = format!("pgoutbox relays the Outbox Event Router's output: set transforms=outbox and transforms.outbox.type={EVENT_ROUTER_CLASS}");
        let list = r.required("transforms", &hint)?;
        let aliases: Vec<String> =
            list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
        let router_given = aliases.iter().any(|a| {
            r.has(&format!("transforms.{a}.type")) && r.str(&format!("transforms.{a}.type")) == Some(EVENT_ROUTER_CLASS)
        });
        if !router_given {
            return Err(match &aliases[..] {
                [one] => {
                    let key = format!("transforms.{one}.type");
                    match r.str(&key) {
                        Some(_) => ConfigError::invalid(&key, format!("is not the Outbox Event Router; {hint}")),
                        None => ConfigError::Missing { key, hint },
                    }
                }
                _ => ConfigError::invalid(
                    "transforms",
                    format!("none of the transforms it lists is the Outbox Event Router; {hint}"),
                ),
            });
        }
        let predicates = parse_predicates(r)?;
        let mut chain = Chain::default();
        for alias in &aliases {
            let type_key = format!("transforms.{alias}.type");
            let class = r.required(&type_key, "the transform's class")?;
            if class == EVENT_ROUTER_CLASS {
                if !chain.router_alias.is_empty() {
                    return Err(ConfigError::invalid(
                        &type_key,
                        format!(
                            "a second Event Router (after `{}`): pgoutbox routes each row once; remove one",
                            chain.router_alias
                        ),
                    ));
                }
                chain.router_gate = parse_gate(r, alias, &predicates)?;
                chain.router_alias = alias.clone();
                continue;
            }
            if class == DECODE_CONTENT_CLASS {
                parse_decode(r, alias, &predicates, &mut chain)?;
                continue;
            }
            let step = parse_step(r, alias, &class, &predicates, &mut chain.warnings)?;
            if chain.router_alias.is_empty() {
                let headers_only = match &step.kind {
                    Kind::Pass => step.class == TRACING_CLASS,
                    Kind::Kafka(t) => t.only_headers(),
                    Kind::HeaderToValue(_) => false,
                };
                if step.class == dbz::ENFORCE_RECORD_SIZE {
                    return Err(ConfigError::invalid(&type_key, format!("{} before the Event Router would shorten the outbox row's columns (its payload among them) to fit max.bytes, in Debezium; pgoutbox does not build that change event and will not cut an event's payload short: remove `{alias}` (a record over the producer's max.request.size stops the relay, naming it)", dbz::ENFORCE_RECORD_SIZE)));
                }
                if !headers_only {
                    return Err(ConfigError::invalid(&type_key, format!("this transform runs before the Event Router, on Debezium's change event of the outbox table, which pgoutbox does not build: only header transforms (InsertHeader, DropHeaders), Filter and the tracing transform can run there; move `{alias}` after the router in `transforms`")));
                }
                chain.before.push(step);
            } else {
                chain.after.push(step);
            }
        }
        Ok(chain)
    }
}

/// `DecodeLogicalDecodingMessageContent`: before the router it makes messages outbox events; after
/// it, it has nothing to decode (Debezium passes the router's records through too).
fn parse_decode(
    r: &mut Reader<'_>,
    alias: &str,
    predicates: &BTreeMap<String, Predicate>,
    chain: &mut Chain,
) -> Result<(), ConfigError> {
    let null_include = r.bool_or(&format!("transforms.{alias}.fields.null.include"), false)?;
    let gate = parse_gate(r, alias, predicates)?;
    if !chain.router_alias.is_empty() {
        chain.warnings.push(format!("transforms.{alias}: {DECODE_CONTENT_CLASS} after the Event Router decodes nothing (it acts on logical decoding messages only, in Debezium as well); put it before the router to relay messages as outbox events, or remove it"));
        return Ok(());
    }
    if let Some(first) = &chain.decode {
        chain.warnings.push(format!("transforms.{alias}: a second {DECODE_CONTENT_CLASS} (after `{}`) decodes nothing, in Debezium as well; remove it", first.alias));
        return Ok(());
    }
    chain.decode = Some(DecodeMessages { alias: alias.to_string(), null_include, gate });
    Ok(())
}

fn parse_step(
    r: &mut Reader<'_>,
    alias: &str,
    class: &str,
    predicates: &BTreeMap<String, Predicate>,
    warnings: &mut Vec<String>,
) -> Result<Step, ConfigError> {
    let type_key = format!("transforms.{alias}.type");
    let prefix = format!("transforms.{alias}.");
    let kind = if class == TRACING_CLASS {
        // Its options (tracing.*) change nothing pgoutbox writes.
        warnings.push(format!("transforms.{alias}: {TRACING_CLASS} passes records through unchanged; pgoutbox emits no OpenTelemetry spans"));
        Kind::Pass
    } else if class == dbz::HEADER_TO_VALUE {
        Kind::HeaderToValue(HeaderToValue::parse(r, &prefix)?)
    } else if class == dbz::ENFORCE_RECORD_SIZE {
        dbz::check_enforce_record_size(r, &prefix)?;
        warnings.push(format!("transforms.{alias}: {class} changes nothing after the Event Router (it shortens the columns of change-event envelopes only, in Debezium as well); remove it, or bound record sizes with the producer's max.request.size"));
        Kind::Pass
    } else if class == dbz::PARTITION_ROUTING || class == dbz::TIMEZONE_CONVERTER {
        // They act on change-event envelopes only; Debezium passes the router's records through.
        warnings.push(format!("transforms.{alias}: {class} changes nothing after the Event Router (it acts on change-event envelopes only, in Debezium as well); remove it"));
        r.consume_prefix(&prefix);
        Kind::Pass
    } else {
        match Transform::parse(class, r, &prefix)? {
            Some(t) => Kind::Kafka(t),
            None if transforms::is_known(class) => unreachable!("a known transform parses"),
            None => return Err(ConfigError::invalid(&type_key, format!("is a transform class pgoutbox does not implement (a custom class, or a scripting transform); pgoutbox implements Kafka's built-in transforms and the Outbox Event Router: remove `{alias}` from transforms or replace it"))),
        }
    };
    let predicate = parse_predicate(r, alias, predicates)?.map(|(_, p, negate)| (p, negate));
    Ok(Step { alias: alias.to_string(), class: class.to_string(), kind, predicate })
}

/// `predicates=a,b` and each `predicates.<name>.type` with its options.
fn parse_predicates(r: &mut Reader<'_>) -> Result<BTreeMap<String, Predicate>, ConfigError> {
    let mut out = BTreeMap::new();
    let Some(list) = r.str("predicates") else { return Ok(out) };
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let type_key = format!("predicates.{name}.type");
        let class = r.required(&type_key, "the predicate's class")?;
        let p = Predicate::parse(&class, r, &format!("predicates.{name}."))?.ok_or_else(|| {
            ConfigError::invalid(&type_key, "is a predicate class pgoutbox does not implement; use TopicNameMatches, HasHeaderKey or RecordIsTombstone (org.apache.kafka.connect.transforms.predicates)")
        })?;
        out.insert(name.to_string(), p);
    }
    Ok(out)
}
