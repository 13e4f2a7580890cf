//! The sink: hands records to the producer without waiting for earlier deliveries, feeds delivery
//! reports to the checkpoint, and publishes the confirmed position for the reader's status updates.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::checkpoint::Resume;
use super::stall::{Stall, StallWatch, WARN_AFTER};
use super::transaction::Transactions;
use super::{Checkpoint, Item};
use crate::config::KafkaConfig;
use crate::error::RelayError;
use crate::kafka::{self, Ack, DeliveryFailure, Producer};
use crate::lsn::Lsn;
use crate::metrics::Metrics;
use crate::outbox::OutboxRecord;
use crate::postgres::wire::pg_epoch_micros;
use std::sync::atomic::Ordering;

pub struct Sink {
    producer: Arc<Producer>,
    checkpoint: Checkpoint,
    confirmed: watch::Sender<Lsn>,
    kafka: KafkaConfig,
    /// Topics known to exist (only tracked when pgoutbox creates topics).
    created: HashSet<Arc<str>>,
    /// Each topic's largest batch, to tell a record too large from a batch too large.
    limits: super::batch_limit::TopicLimits,
    metrics: Arc<Metrics>,
    /// Barriers waiting for everything before them to be acknowledged.
    barriers: Vec<tokio::sync::oneshot::Sender<()>>,
    /// `errors.tolerance=all`: records the broker refuses for good are skipped, through the
    /// dead-letter topic when one is set.
    tolerance: crate::config::ErrorTolerance,
    connector: String,
    /// Dead-letter record's sequence number -> the refused event's, acknowledged together.
    dead_letters: std::collections::HashMap<u64, u64>,
    /// Dead letters built while serving reports, waiting to be queued: (the refused event's sequence
    /// number, the letter). They are queued like any record (waiting while the producer is full)
    /// from the sink's loop, never from inside a report.
    letters_due: std::collections::VecDeque<(u64, OutboxRecord)>,
    /// Reports taken from the producer, reused between wake-ups.
    acks: Vec<Ack>,
    /// Records and bytes handed to the producer per topic since the last `publish`, so the metrics'
    /// lock is taken once per batch, not once per record.
    sent: Vec<(Arc<str>, u64, u64)>,
    /// Warns while the oldest unacknowledged event waits.
    stall: StallWatch,
    /// The log-tailing relay's backlog report (the polling relay measures its backlog in the table).
    backlog: Option<super::backlog::Backlog>,
    /// Exactly once: the open Kafka transaction and the offset record each one ends with.
    txn: Option<Txn>,
    /// The stop request `run` was given (a commit waiting on an absent broker gives way to it).
    stop: CancellationToken,
}

/// The sink's side of exactly once.
struct Txn {
    state: Transactions,
    /// Where the offset record goes, and the slot it names.
    offsets: kafka::offsets::OffsetStore,
    slot: String,
    /// How its offset records are marked: `Manual` under `lsn.flush.mode=manual`.
    written: kafka::offsets::Written,
    transactional_id: String,
    /// `transaction.timeout.ms`: the bound on a commit or an abort.
    timeout: Duration,
}

use kafka::offsets::OFFSET_RECORD;

/// What exactly once needs from the session: the producer's transactional id, the offsets topic, and
/// what a committed offset already holds.
pub struct ExactlyOnce<'a> {
    pub config: &'a crate::config::exactly_once::ExactlyOnce,
    pub offsets: &'a crate::kafka::offsets::OffsetStore,
    pub slot: &'a str,
    pub resume: Option<Resume>,
    /// `lsn.flush.mode=manual`: the slot is the operator's (its records say so).
    pub manual: bool,
}

impl Sink {
    pub fn new(
        producer: impl Into<Arc<Producer>>,
        start: Lsn,
        confirmed: watch::Sender<Lsn>,
        kafka: KafkaConfig,
        metrics: Arc<Metrics>,
    ) -> Self {
        metrics.confirmed_lsn.store(start.0, Ordering::Relaxed);
        let producer: Arc<Producer> = producer.into();
        *metrics.producer.lock().unwrap_or_else(|e| e.into_inner()) = Some(producer.stats());
        Sink {
            producer,
            checkpoint: Checkpoint::new(start),
            confirmed,
            limits: super::batch_limit::TopicLimits::new(&kafka.producer_overrides),
            kafka,
            created: HashSet::new(),
            metrics,
            barriers: Vec::new(),
            tolerance: Default::default(),
            connector: String::new(),
            dead_letters: Default::default(),
            letters_due: Default::default(),
            acks: Vec::new(),
            sent: Vec::new(),
            stall: StallWatch::new(WARN_AFTER),
            backlog: None,
            txn: None,
            stop: CancellationToken::new(),
        }
    }

    /// Exactly once: records go out in Kafka transactions, each ending with the offset record of
    /// its position, and the confirmed position moves only over committed ones. The producer must
    /// be transactional, its transactions initialised.
    pub fn transactional(mut self, eos: ExactlyOnce<'_>) -> Self {
        let start = self.checkpoint.confirmed();
        self.checkpoint = Checkpoint::transactional(start, eos.resume);
        self.txn = Some(Txn {
            state: Transactions::new(eos.config, kafka::transaction_timeout(&self.kafka)),
            offsets: eos.offsets.clone(),
            slot: eos.slot.to_string(),
            written: if eos.manual { kafka::offsets::Written::Manual } else { kafka::offsets::Written::Position },
            transactional_id: eos.config.transactional_id.clone(),
            timeout: kafka::transaction_timeout(&self.kafka),
        });
        self
    }

    /// Reports the events decoded but not yet acknowledged as the backlog, dated by the oldest
    /// unconfirmed transaction (the log-tailing relay).
    pub fn with_backlog(mut self, stall_threshold: Duration) -> Self {
        self.backlog = Some(super::backlog::Backlog::new(stall_threshold));
        self
    }

    /// Applies `errors.tolerance` to records the broker refuses.
    pub fn with_tolerance(mut self, tolerance: crate::config::ErrorTolerance, connector: &str) -> Self {
        self.tolerance = tolerance;
        self.connector = connector.to_string();
        self
    }

    /// Runs until the reader closes the channel or `stop` is cancelled, then waits at most
    /// `drain_timeout` for outstanding acknowledgements. Returns the first definite error.
    pub async fn run(
        mut self,
        mut rx: mpsc::Receiver<Vec<Item>>,
        stop: CancellationToken,
        drain_timeout: Duration,
    ) -> Result<(), RelayError> {
        self.stop = stop.clone();
        let result = self.stream(&mut rx, &stop).await;
        // Nothing more is handed to the producer; what is already with it gets `drain_timeout`.
        drop(rx);
        let drained = match &result {
            Ok(()) => self.drain(drain_timeout).await,
            Err(_) => Ok(()),
        };
        self.publish();
        // Release the reader (it waits for this) before the producer's drop, which purges its queue
        // and can block for up to half a second: off the runtime's thread, which the reader shares.
        drop(self.confirmed);
        // The last reference (exactly once's producer, or the snapshot's under it) ends the client,
        // which can block; a shared one (the relay keeps its at-least-once producer for the next
        // session) is only let go.
        if let Ok(last) = Arc::try_unwrap(self.producer) {
            tokio::task::spawn_blocking(move || drop(last));
        }
        result.and(drained)
    }

    async fn stream(&mut self, rx: &mut mpsc::Receiver<Vec<Item>>, stop: &CancellationToken) -> Result<(), RelayError> {
        loop {
            if !self.letters_due.is_empty() && !self.send_letters(stop).await? {
                return Ok(());
            }
            tokio::select! {
                biased;
                // 1. Delivery reports first: they free room and move the checkpoint. Every report
                //    already waiting is served, so a burst costs one wake-up, not one per event.
                ready = self.producer.ready() => self.serve(ready)?,
                // 2. Stop requested: take no more work.
                _ = stop.cancelled() => return Ok(()),
                // 3. More work from the reader; `None` when it stopped.
                batch = rx.recv() => match batch {
                    Some(items) => {
                        // `poll`: a transaction ends once the reader has nothing more ready.
                        if !self.produce(items, stop).await? || !self.end_transaction_if(rx.is_empty()).await? {
                            return Ok(());
                        }
                    }
                    None => return Ok(()),
                },
                // 4. A transaction due without more input (`interval`, or its age).
                _ = sleep_until(self.txn.as_ref().and_then(|t| t.state.deadline())) => {
                    if !self.end_transaction_if(rx.is_empty()).await? {
                        return Ok(());
                    }
                }
            }
            self.publish();
        }
    }

    /// Exactly once: ends the open Kafka transaction if `transaction.boundary` (or its size) says
    /// so here; `drained` is whether the reader has nothing more ready. `false` when a stop came
    /// while it committed (see [`Sink::commit_transaction`]): the sink must take no more work.
    async fn end_transaction_if(&mut self, drained: bool) -> Result<bool, RelayError> {
        match &self.txn {
            Some(t) if t.state.ends(drained, Instant::now()).is_some() => self.commit_transaction(None).await,
            _ => Ok(true),
        }
    }

    /// Sends the offset record of the position reached and commits the Kafka transaction, then
    /// lets the checkpoint confirm what it held. A failed commit aborts it (best effort) and ends
    /// the session: the next one resumes after the last committed offset.
    /// `within` bounds the commit (a stop's drain); otherwise `transaction.timeout.ms` does, with
    /// a few retries of a commit that timed out.
    ///
    /// `false` when a stop came while the commit waited: the commit is left running, and nothing
    /// more may be handed to the producer (beginning the next transaction before this one ended
    /// fails, and would end the stop with an error instead of cleanly).
    async fn commit_transaction(&mut self, within: Option<Duration>) -> Result<bool, RelayError> {
        if !self.letters_due.is_empty() && !self.send_letters(&CancellationToken::new()).await? {
            return Err(kafka::Error::transient("sending dead letters", "stopped").into());
        }
        let Some(t) = &self.txn else { return Ok(true) };
        let position = self.checkpoint.position();
        let offset = kafka::offsets::SourceOffset {
            slot: Some(t.slot.clone()),
            lsn: position.commit,
            ts_usec: kafka::offsets::now_usec(),
            xid: position.partial.map(|p| p.xid),
            partial: position.partial.map(Into::into),
            processed: Some(position.commit),
            written: t.written,
        };
        let value = offset.value();
        let (offsets, id) = (t.offsets.clone(), t.transactional_id.clone());
        let (timeout, retries) = match within {
            Some(w) => (w, 0),
            None => (t.timeout, 3),
        };
        loop {
            match self.producer.send(offsets.record(&value)) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    let ready = self.producer.ready().await;
                    self.serve(ready)?;
                }
                Err((e, _)) => return Err(kafka::errors::transaction("sending the offset record", &id, e).into()),
            }
        }
        let below = self.checkpoint.next_seq();
        let producer = self.producer.clone();
        let began = Instant::now();
        let mut committing = tokio::task::spawn_blocking(move || {
            let mut tries = 0;
            loop {
                match producer.commit_transaction(timeout) {
                    Err(KafkaError::Transaction(e)) if e.is_retriable() && tries < retries => tries += 1,
                    Err(e) => {
                        // Aborting is a courtesy to the broker (the next session's init aborts it
                        // anyway); a stop that is out of time skips it.
                        if retries > 0 {
                            let _ = producer.abort_transaction(timeout);
                        }
                        return Err(e);
                    }
                    Ok(()) => return Ok(()),
                }
            }
        });
        let stop = self.stop.clone();
        // While the commit waits (for a broker that is away), the stall warning keeps its clock.
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.reset();
        let joined = loop {
            tokio::select! {
                joined = &mut committing => break joined,
                // A stop while the broker does not answer: the commit is left to finish or fail on
                // its own (a process that exits abandons it). Its events are not confirmed either
                // way, and the next session resumes after the last transaction it finds committed.
                _ = stop.cancelled(), if within.is_none() => {
                    if let Some(t) = &mut self.txn {
                        t.state.ended();
                    }
                    tracing::warn!(transactional_id = %id, "stopping while a Kafka transaction commits; its events are published again on restart unless the commit completes");
                    return Ok(false);
                }
                _ = tick.tick() => self.watch_progress(false),
            }
        };
        let committed =
            joined.map_err(|e| RelayError::TaskStopped(format!("committing a Kafka transaction failed: {e}")))?;
        if let Some(t) = &mut self.txn {
            t.state.ended();
        }
        committed.map_err(|e| kafka::errors::transaction("committing the Kafka transaction", &id, e))?;
        tracing::debug!(events = below - self.checkpoint.acked_below(), took = ?began.elapsed(), "committed a Kafka transaction");
        // The commit delivered every record: serve their reports, then let the checkpoint pass them.
        self.serve(Ok(()))?;
        self.checkpoint.kafka_committed(below);
        self.metrics.kafka_transactions.fetch_add(1, Ordering::Relaxed);
        // Under exactly once the offset is written by this commit (Connect's offset commit too).
        self.metrics.record_offset_commit(began.elapsed());
        self.publish();
        Ok(true)
    }

    /// Waits (bounded) for the outstanding acknowledgements, so the final position covers them.
    async fn drain(&mut self, timeout: Duration) -> Result<(), RelayError> {
        if let Some(t) = &self.txn {
            // What a transaction holds is published by its commit, or not at all: commit what was
            // handed over when its position is known, else abort it (the next session sends it again).
            if t.state.is_open() {
                // The commit itself is bounded by the drain timeout (a blocking call that outlived
                // it would hold the process's exit), the rest by a margin.
                match tokio::time::timeout(timeout + Duration::from_secs(1), self.end_open_transaction(timeout)).await {
                    Ok(result) => result?,
                    Err(_) => tracing::warn!("stopped waiting for the Kafka transaction to commit; its events will be published again on restart"),
                }
            }
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.checkpoint.drained() {
            if !self.letters_due.is_empty() {
                // Dropped at the deadline, a letter not yet queued is simply not sent: its event stays
                // unacknowledged and is published again on restart.
                match tokio::time::timeout_at(deadline, self.send_letters(&CancellationToken::new())).await {
                    Ok(sent) => {
                        sent?;
                    }
                    Err(_) => break,
                }
            }
            match tokio::time::timeout_at(deadline, self.producer.ready()).await {
                Ok(ready) => match self.serve(ready) {
                    // Stopping anyway: a delivery that failed for a passing reason (the broker went
                    // away) is like one not acknowledged in time. The position stays before it and
                    // the event is published again on restart.
                    Err(RelayError::Kafka(kafka::Error::Transient { what, source })) => {
                        tracing::warn!(
                            unacknowledged = self.checkpoint.in_flight(),
                            "stopped waiting for acknowledgements after {what} failed ({source}); those events will be published again on restart"
                        );
                        break;
                    }
                    other => other?,
                },
                Err(_) => {
                    tracing::warn!(
                        unacknowledged = self.checkpoint.in_flight(),
                        "stopped waiting for acknowledgements; those events will be published again on restart"
                    );
                    break;
                }
            }
            self.publish();
        }
        Ok(())
    }

    async fn end_open_transaction(&mut self, within: Duration) -> Result<(), RelayError> {
        let Some(t) = &self.txn else { return Ok(()) };
        if t.state.ends(true, Instant::now()).is_some() || t.state.at_point() {
            return self.commit_transaction(Some(within)).await.map(|_| ());
        }
        let (producer, timeout) = (self.producer.clone(), within);
        let _ = tokio::task::spawn_blocking(move || producer.abort_transaction(timeout)).await;
        Ok(())
    }

    fn publish(&mut self) {
        for (topic, records, bytes) in self.sent.drain(..) {
            self.metrics.record_sent(&topic, records, bytes);
        }
        if !self.barriers.is_empty() && self.checkpoint.drained() {
            for b in self.barriers.drain(..) {
                let _ = b.send(());
            }
        }
        let c = self.checkpoint.confirmed();
        let mut confirmed_transactions = 0;
        let mut now = None;
        for commit_time in self.checkpoint.take_confirmed() {
            let now = *now.get_or_insert_with(|| pg_epoch_micros(std::time::SystemTime::now()));
            self.metrics.record_latency_us(now.saturating_sub(commit_time).max(0) as u64);
            confirmed_transactions += 1;
        }
        self.metrics.transactions_confirmed.fetch_add(confirmed_transactions, Ordering::Relaxed);
        self.metrics.confirmed_lsn.store(c.0, Ordering::Relaxed);
        self.confirmed.send_if_modified(|v| {
            let changed = *v != c;
            *v = c;
            changed
        });
    }

    /// Serves the producer's events and applies their reports, in order.
    fn serve(&mut self, ready: std::io::Result<()>) -> Result<(), RelayError> {
        ready.map_err(|e| kafka::Error::transient("waiting for delivery reports", e))?;
        let mut acks = std::mem::take(&mut self.acks);
        self.producer.serve(&mut acks);
        let oldest = self.checkpoint.acked_below();
        let mut result = Ok(());
        for ack in acks.drain(..) {
            if result.is_ok() {
                result = self.on_ack(ack);
            }
        }
        self.acks = acks;
        self.watch_progress(self.checkpoint.acked_below() != oldest);
        result
    }

    /// Says so when the oldest unacknowledged event has waited `WARN_AFTER` (librdkafka retries it
    /// silently, for as long as it takes; one stuck partition is enough to hold the position), and
    /// when it is acknowledged.
    fn watch_progress(&mut self, progressed: bool) {
        let now = Instant::now();
        match self.stall.observe(now, progressed, !self.checkpoint.drained()) {
            Some(Stall::Stalled(waited)) => {
                // librdkafka's own view of an exactly-once producer (the transaction's state, its
                // producer id and epoch) tells a coordinator that does not answer from a partition
                // leader.
                let state = self.producer.stats().lock().map(|s| s.transaction_state.clone()).unwrap_or_default();
                tracing::warn!(
                    unacknowledged = self.checkpoint.in_flight(),
                    producer = %state,
                    "the oldest event sent to Kafka has waited {}s for an acknowledgement; it is retried until the broker takes it, and the confirmed position stays before it. Check the broker (and the leader of its partition); RUST_LOG=info,librdkafka=debug with producer.override.debug=broker,msg,eos shows the producer's side",
                    waited.as_secs()
                )
            }
            Some(Stall::Resumed(after)) => {
                tracing::info!("acknowledgements from Kafka resumed; the oldest event waited {}s", after.as_secs())
            }
            None => {}
        }
        self.metrics.unacknowledged_wait_ms.store(self.stall.waited(now).as_millis() as u64, Ordering::Relaxed);
        let lag_us = self
            .checkpoint
            .oldest_unconfirmed_commit()
            .map_or(0, |commit| pg_epoch_micros(std::time::SystemTime::now()).saturating_sub(commit).max(0) as u64);
        self.metrics.slot_lag_ms.store(lag_us / 1000, Ordering::Relaxed);
        if let Some(b) = &mut self.backlog {
            b.report(&self.metrics, self.checkpoint.in_flight(), Duration::from_micros(lag_us));
        }
    }

    fn on_ack(&mut self, ack: Ack) -> Result<(), RelayError> {
        match ack {
            Ack::Delivered(seq) if seq == OFFSET_RECORD as u64 => Ok(()),
            Ack::Delivered(seq) => {
                self.checkpoint.acked(seq);
                // A dead letter stands for the refused event: both are handled now.
                if let Some(refused) = self.dead_letters.remove(&seq) {
                    self.checkpoint.acked(refused);
                }
                self.metrics.events_acked.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            // A dead letter that cannot be delivered for good is not dead-lettered again (that loops
            // forever): the relay stops, naming the dead-letter topic.
            Ack::Failed { seq, error, topic, .. } if seq == OFFSET_RECORD as u64 => {
                Err(kafka::Error::transient(format!("writing the offset record to `{topic}`"), error).into())
            }
            // Inside a Kafka transaction a record that failed fails the transaction: it cannot be
            // skipped (errors.tolerance) without aborting everything else in it.
            Ack::Failed { error, topic, event_id, .. } if self.txn.is_some() => {
                Err(delivery_error(error, topic, event_id))
            }
            Ack::Failed { seq, error, topic, event_id, .. } if self.dead_letters.contains_key(&seq) => {
                Err(dead_letter_error(error, topic, event_id))
            }
            // The broker refused the batch, not this record: never skipped (see `batch_limit`).
            Ack::Failed { error, topic, event_id, size, .. }
                if error.rdkafka_error_code() == Some(RDKafkaErrorCode::MessageSizeTooLarge)
                    && !self.limits.too_large_alone(&topic, size) =>
            {
                let fix = self.limits.fix(&topic);
                Err(RelayError::Delivery(Box::new(DeliveryFailure { event_id, topic, error, fix })))
            }
            Ack::Failed { seq, error, topic, event_id, .. } => match delivery_error(error, topic, event_id) {
                RelayError::Delivery(f) if self.tolerance.tolerate => self.tolerate(seq, *f),
                e => Err(e),
            },
            Ack::Fatal { reason, code } => Err(kafka::Error::Fatal { reason, code }.into()),
            Ack::Refused(reason) => Err(kafka::Error::Refused(reason).into()),
        }
    }

    /// Skips an event the broker refused for good (errors.tolerance=all). With a dead-letter topic the
    /// event counts as handled only once its dead letter is acknowledged, so the position never passes
    /// an event that left no trace.
    fn tolerate(&mut self, seq: u64, f: DeliveryFailure) -> Result<(), RelayError> {
        tracing::warn!(event = %f.event_id, topic = %f.topic, error = %f.error, "skipping an event the broker refused (errors.tolerance=all)");
        self.metrics.delivery_errors.fetch_add(1, Ordering::Relaxed);
        self.metrics.record_error(self.tolerance.log);
        let Some(dlq) = self.tolerance.dead_letter_topic.clone() else {
            self.checkpoint.acked(seq);
            return Ok(());
        };
        let message = f.to_string();
        let failure = crate::outbox::dead_letter::Failure {
            stage: crate::outbox::dead_letter::Stage::KafkaProduce,
            message: &message,
            connector: &self.connector,
            original_topic: Some(&f.topic),
            event_id: Some(&f.event_id),
            table: None,
        };
        let record =
            crate::outbox::dead_letter::record(&Arc::from(dlq.as_str()), &failure, None, super::reader::now_ms());
        self.letters_due.push_back((seq, record));
        self.metrics.dead_letters.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Queues the due dead letters, waiting while the producer is full. Returns `false` if `stop`
    /// interrupted it (the rest stay due; their events stay unacknowledged).
    async fn send_letters(&mut self, stop: &CancellationToken) -> Result<bool, RelayError> {
        while let Some((refused, record)) = self.letters_due.pop_front() {
            if let Err((error, fix)) = self.ensure_topic(&record.topic).await? {
                let (event_id, topic) = (record.event_id(), record.topic.to_string());
                return Err(RelayError::DeadLetterRefused(Box::new(DeliveryFailure { event_id, topic, error, fix })));
            }
            let letter = self.checkpoint.next_seq();
            match self.enqueue(&record, stop).await? {
                Queued::Yes => {
                    self.dead_letters.insert(letter, refused);
                }
                Queued::Stopped => {
                    self.letters_due.push_front((refused, record));
                    return Ok(false);
                }
                Queued::Refused(error) => {
                    return Err(dead_letter_error(error, record.topic.to_string(), record.event_id()))
                }
            }
        }
        Ok(true)
    }

    /// Creates the record's topic first when pgoutbox creates topics (`topic.creation.*`).
    /// Creates `topic` once (`topic.creation.default.*`). `Ok(Err(..))` is a creation the cluster
    /// refused for good (an invalid name, a policy, a missing CREATE grant), with its fix: no retry
    /// helps, so the event it was for is handled like a record the broker refused.
    async fn ensure_topic(&mut self, topic: &Arc<str>) -> Result<Result<(), (KafkaError, &'static str)>, RelayError> {
        if let Some(tc) = self.kafka.topic_creation.clone() {
            if !self.created.contains(topic) {
                match kafka::create_topics(&self.kafka, &[topic], tc.partitions, tc.replication_factor).await {
                    Ok(()) => {}
                    // As Connect: a client that may not create topics may still write to one that
                    // exists.
                    Err(e)
                        if kafka::errors::code_of(&e).is_some_and(kafka::errors::is_authorization)
                            && kafka::topic_exists(&self.kafka, topic).await.unwrap_or(false) => {}
                    Err(e) => match kafka::errors::code_of(&e).and_then(kafka::errors::creation_fix) {
                        Some(fix) => return Ok(Err((e, fix))),
                        None => return Err(kafka::Error::transient(format!("creating topic `{topic}`"), e).into()),
                    },
                }
                self.created.insert(topic.clone());
            }
        }
        Ok(Ok(()))
    }

    /// Hands one record to librdkafka under the next sequence number, waiting (serving reports)
    /// while its queue is full. The number is only registered once librdkafka has taken it.
    async fn enqueue(&mut self, record: &OutboxRecord, stop: &CancellationToken) -> Result<Queued, RelayError> {
        let seq = self.checkpoint.next_seq();
        loop {
            match self.producer.send(kafka::base_record(record, seq as usize)) {
                Ok(()) => {
                    let registered = self.checkpoint.event_sent();
                    debug_assert_eq!(registered, seq);
                    return Ok(Queued::Yes);
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _))
                    if self.producer.in_flight() == 0 =>
                {
                    // Full with nothing in it: the record alone is larger than the queue, and
                    // waiting would never make room.
                    return Ok(Queued::Refused(KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge)));
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    // The producer's queue is full (a slow or absent broker): wait for deliveries to
                    // make room, or for a stop. Serving only collects dead letters, never sends, so
                    // `seq` stays the next number.
                    tokio::select! {
                        biased;
                        ready = self.producer.ready() => {
                            self.serve(ready)?;
                            self.publish();
                        }
                        _ = stop.cancelled() => return Ok(Queued::Stopped),
                        _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                    }
                }
                Err((error, _)) => return Ok(Queued::Refused(error)),
            }
        }
    }

    /// Hands a batch to the producer, in order. Returns `false` if `stop` interrupted it: the rest of
    /// the batch is not sent, and so its commits are not confirmed.
    async fn produce(&mut self, items: Vec<Item>, stop: &CancellationToken) -> Result<bool, RelayError> {
        for item in items {
            match item {
                Item::Event(record) => {
                    if let Some(t) = &mut self.txn {
                        if t.state.event(record.size(), Instant::now()) {
                            let id = t.transactional_id.clone();
                            self.producer
                                .begin_transaction()
                                .map_err(|e| kafka::errors::transaction("beginning a Kafka transaction", &id, e))?;
                        }
                    }
                    if !self.send(record, stop).await? {
                        return Ok(false);
                    }
                }
                Item::Commit { end_lsn, commit_time } => {
                    self.checkpoint.commit(end_lsn, commit_time);
                    if let Some(t) = &mut self.txn {
                        t.state.commit();
                        if !self.end_transaction_if(false).await? {
                            return Ok(false);
                        }
                    }
                }
                Item::Progress(partial) => {
                    if let Some(p) = partial {
                        self.checkpoint.progress(p.xid, p.lsn, p.changes);
                    }
                    if let Some(t) = &mut self.txn {
                        t.state.point(partial.is_none());
                        if !self.end_transaction_if(false).await? {
                            return Ok(false);
                        }
                    }
                }
                Item::IdleWalEnd(end) => self.checkpoint.idle_wal_end(end),
                Item::Barrier(b) => {
                    self.barriers.push(b);
                    self.publish();
                }
            }
        }
        Ok(true)
    }

    /// Hands one record to the producer, waiting while its queue is full. Returns `false` if `stop`
    /// was requested before the record could be queued (it is then not registered).
    async fn send(&mut self, record: OutboxRecord, stop: &CancellationToken) -> Result<bool, RelayError> {
        if let Err((error, fix)) = self.ensure_topic(&record.topic).await? {
            let f = DeliveryFailure { event_id: record.event_id(), topic: record.topic.to_string(), error, fix };
            if !self.tolerance.tolerate {
                return Err(RelayError::Delivery(Box::new(f)));
            }
            // Registered so that its dead letter stands for it in order, as a record refused at once.
            let refused = self.checkpoint.event_sent();
            return self.tolerate(refused, f).map(|()| true);
        }
        self.limits.learn(&self.kafka, &record.topic).await;
        match self.enqueue(&record, stop).await? {
            Queued::Yes => {
                let bytes = (record.size() - record.topic.len()) as u64;
                match self.sent.iter_mut().find(|(t, ..)| Arc::ptr_eq(t, &record.topic) || *t == record.topic) {
                    Some(entry) => {
                        entry.1 += 1;
                        entry.2 += bytes;
                    }
                    None => self.sent.push((record.topic.clone(), 1, bytes)),
                }
                Ok(true)
            }
            Queued::Stopped => Ok(false),
            Queued::Refused(error) => match delivery_error(error, record.topic.to_string(), record.event_id()) {
                // Refused before it was queued (e.g. larger than message.max.bytes): register it so
                // the dead letter can stand for it in order.
                RelayError::Delivery(f) if self.tolerance.tolerate => {
                    let refused = self.checkpoint.event_sent();
                    self.tolerate(refused, *f).map(|()| true)
                }
                e => Err(e),
            },
        }
    }
}

/// What became of a record handed to librdkafka.
#[derive(Debug)]
enum Queued {
    Yes,
    /// A stop was requested while waiting for room.
    Stopped,
    /// librdkafka refused it at once.
    Refused(KafkaError),
}

/// A dead letter that failed: refused for good, it stops the relay naming the dead-letter topic (it
/// is never dead-lettered again); a transient failure is like any other.
fn dead_letter_error(error: KafkaError, topic: String, event_id: String) -> RelayError {
    match delivery_error(error, topic, event_id) {
        RelayError::Delivery(f) => RelayError::DeadLetterRefused(f),
        transient => transient,
    }
}

fn delivery_error(error: KafkaError, topic: String, event_id: String) -> RelayError {
    match kafka::is_permanent(&error) {
        Some(fix) => RelayError::Delivery(Box::new(DeliveryFailure { event_id, topic, error, fix })),
        None => kafka::Error::transient(format!("delivery of event `{event_id}` to `{topic}`"), error).into(),
    }
}

/// Resolves at `at`, never when there is none.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 20, item 11: a record larger than librdkafka's whole queue can never be queued, and
    /// waiting for room (what a full queue with records in flight asks) would hang the relay without
    /// a word. The config refuses such limits (`buffer.memory` below `max.request.size`); this is the
    /// sink's own guard, with librdkafka's queue limit set directly: refused at once, as too large.
    #[tokio::test]
    async fn a_record_larger_than_the_whole_queue_is_refused_not_waited_for() {
        let mut producer_overrides = crate::config::security::ClientSettings::default();
        producer_overrides.set("queue.buffering.max.kbytes", "1");
        let kafka = KafkaConfig {
            // Nothing listens there: the record can only be queued, never delivered.
            bootstrap_servers: "127.0.0.1:1".into(),
            producer_overrides,
            client_security: Default::default(),
            topic_creation: None,
        };
        let producer = Producer::new(&kafka, "test").unwrap();
        let (confirmed, _) = watch::channel(Lsn::ZERO);
        let mut sink = Sink::new(producer, Lsn::ZERO, confirmed, kafka, Arc::new(Metrics::default()));
        let record = |bytes: usize| OutboxRecord {
            topic: Arc::from("orders"),
            key: Some(bytes::Bytes::from_static(b"order-1")),
            value: Some(bytes::Bytes::from(vec![b'x'; bytes])),
            headers: Vec::new(),
            partition: None,
            timestamp_ms: 0,
        };
        let stop = CancellationToken::new();
        let alone = tokio::time::timeout(Duration::from_secs(5), sink.enqueue(&record(4096), &stop)).await;
        match alone {
            Ok(Ok(Queued::Refused(KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge)))) => {}
            other => panic!("a record larger than the empty queue must be refused as too large, got {other:?}"),
        }
        let small = tokio::time::timeout(Duration::from_secs(5), sink.enqueue(&record(100), &stop)).await;
        assert!(matches!(small, Ok(Ok(Queued::Yes))), "a record that fits is queued: {small:?}");
        // With a record queued, a full queue means waiting for room (deliveries, or a stop).
        let waiting = tokio::time::timeout(Duration::from_millis(500), sink.enqueue(&record(4096), &stop)).await;
        assert!(waiting.is_err(), "with records queued, a full queue waits for room: {waiting:?}");
        stop.cancel();
        let stopped = tokio::time::timeout(Duration::from_secs(5), sink.enqueue(&record(4096), &stop)).await;
        assert!(matches!(stopped, Ok(Ok(Queued::Stopped))), "a stop ends the wait: {stopped:?}");
    }
}
