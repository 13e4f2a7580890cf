//! Exactly once (Kafka Connect's KIP-618 keys): the records of a run of whole PostgreSQL
//! transactions and one source-offset record commit in one Kafka transaction, so a restarted relay
//! resumes exactly after the last committed one and consumers reading `read_committed` see every
//! event once.
//!
//! The keys are Connect's:
//! - worker `exactly.once.source.support`: `disabled` (the default), `preparing` (Connect's step of a
//!   rolling upgrade: still no transactions), `enabled`;
//! - connector `exactly.once.support`: `requested` (the default) or `required`;
//! - connector `transaction.boundary`: `poll` (the default: a transaction ends when the relay has
//!   handed over what the stream had ready, or after 2 s of a stream that never runs dry), `interval` (`transaction.boundary.interval.ms`, default the worker's
//!   `offset.flush.interval.ms`, else 60000), `connector` (pgoutbox: one Kafka transaction per
//!   PostgreSQL transaction; Connect refuses it for Debezium's connector, which defines no
//!   boundaries);
//! - connector `offsets.storage.topic`: the connector's own offsets topic (else the worker's
//!   `offset.storage.topic`).
//!
//! Connect allows exactly once in distributed mode only; pgoutbox allows it in `pgoutbox run` and in
//! both worker modes. The producer's `transactional.id` is Connect's, `<group.id>-<connector>-0`
//! (`group.id` defaults to `pgoutbox` where there is none), so a second instance of the connector
//! fences a zombie first one.

use std::time::Duration;

use crate::connect::{ConfigError, Reader};

/// Where Kafka transactions end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// `poll`: when the relay has handed over everything the stream had ready, at the end of a
    /// PostgreSQL transaction.
    Poll,
    /// `interval`: at the first PostgreSQL transaction's end once this long has passed since the
    /// Kafka transaction began.
    Interval(Duration),
    /// `connector`: at every PostgreSQL transaction's end.
    Connector,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExactlyOnce {
    pub boundary: Boundary,
    /// Connect's `<group.id>-<connector name>-<task>` (the task is always 0).
    pub transactional_id: String,
    /// `exactly.once.support=required`: refuse to run without transactions (a broker without them
    /// stops the relay instead of publishing at least once).
    pub required: bool,
}

/// The worker key's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SourceSupport {
    Disabled,
    Preparing,
    Enabled,
}

/// `None` when exactly once is off. `connector_name` names the transactional id; `polling` tells
/// whether the polling relay runs (which cannot offer it).
pub fn parse(r: &mut Reader<'_>, connector_name: &str, polling: bool) -> Result<Option<ExactlyOnce>, ConfigError> {
    let support = r.choice(
        "exactly.once.source.support",
        SourceSupport::Disabled,
        &[
            ("disabled", SourceSupport::Disabled),
            ("preparing", SourceSupport::Preparing),
            ("enabled", SourceSupport::Enabled),
        ],
    )?;
    let required = r.choice("exactly.once.support", false, &[("requested", false), ("required", true)])?;
    let boundary = r.choice(
        "transaction.boundary",
        Boundary::Poll,
        &[
            ("poll", Boundary::Poll),
            ("interval", Boundary::Interval(Duration::ZERO)),
            ("connector", Boundary::Connector),
        ],
    )?;
    let interval_key = "transaction.boundary.interval.ms";
    if support != SourceSupport::Enabled {
        if required {
            return Err(ConfigError::invalid(
                "exactly.once.support",
                "is `required` but exactly.once.source.support is not `enabled`: set exactly.once.source.support=enabled (a worker key; in `pgoutbox run`, in the same file), or exactly.once.support=requested to publish at least once",
            ));
        }
        for k in ["transaction.boundary", interval_key] {
            if r.has(k) {
                r.consume(k);
                r.warn(format!("{k} is set but exactly.once.source.support is not `enabled`: pgoutbox publishes at least once, without transactions"));
            }
        }
        return Ok(None);
    }
    if polling {
        if required {
            return Err(ConfigError::invalid(
                "exactly.once.support",
                "is `required`, which the polling relay cannot give: its `published_at` mark and the Kafka commit are two transactions, so a crash between them publishes that batch again; use the log-tailing relay (pgoutbox.relay=log_tailing) or exactly.once.support=requested",
            ));
        }
        r.warn("exactly.once.source.support=enabled: the polling relay publishes at least once (a crash between the Kafka commit and the published_at mark publishes that batch again)");
        return Ok(None);
    }
    let boundary = match boundary {
        Boundary::Interval(_) => {
            // Connect's default: the worker's offset-flush interval.
            let default = r.millis_or("offset.flush.interval.ms", 60_000)?;
            let every = match r.str(interval_key) {
                None => default,
                Some(_) => r.millis_or(interval_key, 0)?,
            };
            if every.is_zero() {
                return Err(ConfigError::invalid(interval_key, "must be greater than 0"));
            }
            Boundary::Interval(every)
        }
        other => {
            if r.has(interval_key) {
                r.consume(interval_key);
                r.warn(format!("{interval_key} is set but transaction.boundary is not `interval`: it is not used"));
            }
            other
        }
    };
    let group = r.str("group.id").unwrap_or("pgoutbox").to_string();
    Ok(Some(ExactlyOnce { boundary, transactional_id: format!("{group}-{connector_name}-0"), required }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn parse_map(pairs: &[(&str, &str)], polling: bool) -> Result<Option<ExactlyOnce>, ConfigError> {
        let map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut r = Reader::new(&map);
        parse(&mut r, "orders", polling)
    }

    #[test]
    fn off_unless_the_worker_enables_it() {
        assert_eq!(parse_map(&[], false).unwrap(), None);
        assert_eq!(parse_map(&[("exactly.once.source.support", "preparing")], false).unwrap(), None);
        let e = parse_map(&[("exactly.once.support", "required")], false).unwrap_err().to_string();
        assert!(e.contains("exactly.once.source.support=enabled"), "{e}");
    }

    #[test]
    fn connects_keys_and_transactional_id() {
        let eos = parse_map(&[("exactly.once.source.support", "enabled"), ("group.id", "connect-cluster")], false)
            .unwrap()
            .unwrap();
        assert_eq!(eos.transactional_id, "connect-cluster-orders-0");
        assert_eq!(eos.boundary, Boundary::Poll);
        assert!(!eos.required);
        let eos = parse_map(
            &[
                ("exactly.once.source.support", "ENABLED"),
                ("exactly.once.support", "required"),
                ("transaction.boundary", "interval"),
                ("offset.flush.interval.ms", "5000"),
            ],
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(eos.transactional_id, "pgoutbox-orders-0");
        assert_eq!(eos.boundary, Boundary::Interval(Duration::from_millis(5000)));
        assert!(eos.required);
        let eos = parse_map(
            &[
                ("exactly.once.source.support", "enabled"),
                ("transaction.boundary", "interval"),
                ("transaction.boundary.interval.ms", "250"),
            ],
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(eos.boundary, Boundary::Interval(Duration::from_millis(250)));
        let e = parse_map(&[("exactly.once.source.support", "enabled"), ("transaction.boundary", "sometimes")], false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("transaction.boundary") && e.contains("poll, interval, connector"), "{e}");
    }

    #[test]
    fn the_polling_relay_cannot_be_required_to() {
        let on = [("exactly.once.source.support", "enabled"), ("exactly.once.support", "required")];
        let e = parse_map(&on, true).unwrap_err().to_string();
        assert!(e.contains("polling relay") && e.contains("published_at"), "{e}");
        assert_eq!(parse_map(&on[..1], true).unwrap(), None);
    }
}
