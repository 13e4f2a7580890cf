//! End-to-end latency, the same for every relay: a consumer reads the relay's topics and takes, for
//! each record, the time since the application sent the transaction that wrote it (the `sent_us`
//! the workload puts in each payload; both run on this machine's clock).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

pub struct EndToEnd {
    samples: Arc<Mutex<Vec<u64>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// The `sent_us` number of a payload, whether the payload is embedded as JSON or as an escaped string.
fn sent_us(value: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"sent_us";
    let at = value.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let digits: Vec<u8> =
        value[at..].iter().skip_while(|b| !b.is_ascii_digit()).take_while(|b| b.is_ascii_digit()).copied().collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

impl EndToEnd {
    /// Starts reading every partition of `topics` from its end.
    pub fn start(broker: &str, topics: &[String], partitions: i32) -> anyhow::Result<EndToEnd> {
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", broker)
            .set("group.id", "pgoutbox-bench-e2e")
            .set("enable.auto.commit", "false")
            // tansu answers a fetch at its max wait rather than when data arrives, and a short wait
            // makes it spend most of a core on fetches, which slows every relay's acknowledgements
            // on this 2-core machine (measured: at 5 ms, pgoutbox's commit-to-ack p50 went from 7 to
            // 44-62 ms). 100 ms keeps the broker out of the way; the e2e floor is then ~100 ms.
            .set("fetch.wait.max.ms", std::env::var("PGOUTBOX_BENCH_FETCH_WAIT_MS").as_deref().unwrap_or("100"))
            .set("fetch.error.backoff.ms", "5")
            .create()?;
        let mut tpl = TopicPartitionList::new();
        for t in topics {
            for p in 0..partitions {
                tpl.add_partition_offset(t, p, Offset::End)?;
            }
        }
        consumer.assign(&tpl)?;
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (samples.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                if let Some(Ok(m)) = consumer.poll(Duration::from_millis(50)) {
                    let now = now_us();
                    if let Some(sent) = m.payload().and_then(sent_us) {
                        s.lock().expect("not poisoned").push(now.saturating_sub(sent));
                    }
                }
            }
        });
        Ok(EndToEnd { samples, stop, thread: Some(thread) })
    }

    /// How many records were consumed since the last `take`.
    pub fn count(&self) -> usize {
        self.samples.lock().expect("not poisoned").len()
    }

    /// The latencies (µs) of the records consumed since the last call.
    pub fn take(&self) -> Vec<u64> {
        std::mem::take(&mut *self.samples.lock().expect("not poisoned"))
    }
}

impl Drop for EndToEnd {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The `q` quantile of `samples` (sorted in place), in milliseconds.
pub fn quantile_ms(samples: &mut [u64], q: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
    samples[i] as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sent_us_is_found_in_embedded_and_escaped_payloads() {
        assert_eq!(sent_us(br#"{"payload":{"seq":1,"sent_us":1234567,"x":"y"}}"#), Some(1_234_567));
        assert_eq!(sent_us(br#"{"payload":"{\"seq\": 1, \"sent_us\": 42, \"x\": 1}"}"#), Some(42));
        assert_eq!(sent_us(b"no stamp here"), None);
        let mut v = vec![5000, 1000, 3000, 2000, 4000];
        assert_eq!(quantile_ms(&mut v, 0.5), 3.0);
        assert_eq!(quantile_ms(&mut v, 0.99), 5.0);
    }
}
