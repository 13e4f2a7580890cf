//! Debezium's lag statistics (3.6 and later): `MilliSecondsBehindSource`'s minimum, maximum and
//! average, and its 50th, 95th and 99th percentiles, over every streamed event since the task started
//! (no window, no decay; a new task starts them again). Debezium keeps the percentiles in a DDSketch
//! with 1 % relative accuracy; this is the same kind of sketch (logarithmic bins, each reported as a
//! value within 1 % of every sample in it), so the figures agree with Debezium's to within that.
//!
//! The relay samples once per transaction with events, weighted by its events: every event of a
//! transaction has the transaction's commit time as its source time, and they are read together.

/// The relative accuracy of the percentiles.
const ACCURACY: f64 = 0.01;

#[derive(Debug, Clone, Default)]
pub struct LagStatistics {
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
    /// Samples of 0 ms (below the first bin).
    zero: u64,
    /// bins[i]: samples v with gamma^(i-1) < v <= gamma^i, for v >= 1.
    bins: Vec<u64>,
}

/// What the exposition reports; `None` before the first event (Debezium's attributes are null then,
/// and its exporter leaves them out).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LagFigures {
    pub min: u64,
    pub max: u64,
    pub average: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

fn gamma() -> f64 {
    (1.0 + ACCURACY) / (1.0 - ACCURACY)
}

impl LagStatistics {
    /// `events` events read `ms` milliseconds after their commit.
    pub fn record(&mut self, ms: u64, events: u64) {
        if events == 0 {
            return;
        }
        if self.count == 0 {
            (self.min, self.max) = (ms, ms);
        } else {
            self.min = self.min.min(ms);
            self.max = self.max.max(ms);
        }
        self.count += events;
        self.sum += u128::from(ms) * u128::from(events);
        if ms == 0 {
            self.zero += events;
            return;
        }
        let index = ((ms as f64).ln() / gamma().ln()).ceil().max(0.0) as usize;
        if self.bins.len() <= index {
            self.bins.resize(index + 1, 0);
        }
        self.bins[index] += events;
    }

    /// The value at quantile `q` (0..=1): the bin holding the sample of rank q * (count - 1),
    /// reported as its lower bound times (1 + accuracy), as DDSketch reports it.
    fn quantile(&self, q: f64) -> f64 {
        let rank = q * (self.count - 1) as f64;
        let mut seen = self.zero as f64;
        if seen > rank {
            return 0.0;
        }
        for (i, &n) in self.bins.iter().enumerate() {
            seen += n as f64;
            if n > 0 && seen > rank {
                return gamma().powi(i as i32 - 1) * (1.0 + ACCURACY);
            }
        }
        self.max as f64
    }

    pub fn figures(&self) -> Option<LagFigures> {
        (self.count > 0).then(|| LagFigures {
            min: self.min,
            max: self.max,
            average: self.sum as f64 / self.count as f64,
            p50: self.quantile(0.50),
            p95: self.quantile(0.95),
            p99: self.quantile(0.99),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn within_accuracy(got: f64, want: f64) -> bool {
        (got - want).abs() <= want * ACCURACY + 1e-9
    }

    #[test]
    fn nothing_is_reported_before_the_first_event() {
        let mut s = LagStatistics::default();
        assert_eq!(s.figures(), None);
        s.record(12, 0);
        assert_eq!(s.figures(), None, "a transaction without events is no sample");
    }

    #[test]
    fn min_max_and_average_are_exact_and_weighted_by_events() {
        let mut s = LagStatistics::default();
        s.record(10, 3);
        s.record(40, 1);
        s.record(0, 1);
        let f = s.figures().unwrap();
        assert_eq!((f.min, f.max), (0, 40));
        assert_eq!(f.average, (30.0 + 40.0) / 5.0);
    }

    #[test]
    fn percentiles_are_within_one_percent_of_the_exact_ones() {
        let mut s = LagStatistics::default();
        let mut all: Vec<u64> = Vec::new();
        // A skewed spread: many small lags, a long tail.
        for i in 1..=10_000u64 {
            let v = if i % 100 == 0 { 5_000 + i } else { 1 + (i * 37) % 250 };
            s.record(v, 1);
            all.push(v);
        }
        all.sort_unstable();
        let exact = |q: f64| all[(q * (all.len() - 1) as f64) as usize] as f64;
        let f = s.figures().unwrap();
        for (q, got) in [(0.50, f.p50), (0.95, f.p95), (0.99, f.p99)] {
            assert!(within_accuracy(got, exact(q)), "p{}: {got} against {}", q * 100.0, exact(q));
        }
    }

    #[test]
    fn zero_lags_are_reported_as_zero() {
        let mut s = LagStatistics::default();
        s.record(0, 99);
        s.record(1_000, 1);
        let f = s.figures().unwrap();
        assert_eq!((f.p50, f.p95), (0.0, 0.0));
        assert!(within_accuracy(f.p99, 0.0) || f.p99 == 0.0);
        s.record(1_000, 10);
        assert!(within_accuracy(s.figures().unwrap().p99, 1_000.0));
    }
}
