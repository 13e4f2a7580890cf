//! The iteration order of a `java.util.HashMap` with `String` keys. Confluent's JSON Schema
//! converter builds its schemas in hash maps (everit's `ObjectSchema` properties, the
//! `connect.parameters` map and org.json's `JSONObject` that prints it), so the registered schema
//! text lists object members in this order, not in field order.
//!
//! A key's bucket is `(h ^ (h >>> 16)) & (capacity - 1)` with `h = String.hashCode()`; the map
//! iterates buckets in index order and a bucket's keys in the order they were put (a resize splits
//! a bucket keeping that order). The capacity grows by doubling once the size passes three
//! quarters of it. Not modelled: a bucket of eight or more keys (a tree bin, or the resize a small
//! table makes instead), which needs keys chosen to collide.

/// How the map was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    /// `new HashMap<>()`: 16 buckets at the first put.
    Default,
    /// `new HashMap<>(n)`: the next power of two from `n` (1 for 0).
    WithCapacity(usize),
}

/// `String.hashCode()`: over UTF-16 code units, wrapping.
pub fn string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

fn spread(s: &str) -> u32 {
    let h = string_hash(s) as u32;
    h ^ (h >> 16)
}

/// The entries in the order the map iterates them, when put in the order given (a repeated key
/// keeps its first place and takes the last value, as `put` does).
pub fn order<T>(entries: Vec<(String, T)>, made: Made) -> Vec<(String, T)> {
    let mut distinct: Vec<(String, T)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        match distinct.iter_mut().find(|(d, _)| *d == k) {
            Some(slot) => slot.1 = v,
            None => distinct.push((k, v)),
        }
    }
    let mut capacity = match made {
        Made::Default => 16usize,
        Made::WithCapacity(n) => n.max(1).next_power_of_two(),
    };
    // `threshold = (int) (capacity * 0.75f)`, and a put that makes the size pass it doubles the table.
    let mut size = 0usize;
    for _ in &distinct {
        size += 1;
        if size > capacity * 3 / 4 {
            capacity *= 2;
        }
    }
    let mask = (capacity - 1) as u32;
    // A stable sort keeps the put order within a bucket.
    distinct.sort_by_key(|(k, _)| spread(k) & mask);
    distinct
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(names: &[&str], made: Made) -> Vec<String> {
        order(names.iter().map(|n| (n.to_string(), ())).collect(), made).into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn hash_codes_are_javas() {
        // Printed by a JVM (Java 17).
        assert_eq!(string_hash(""), 0);
        assert_eq!(string_hash("a"), 97);
        assert_eq!(string_hash("hello"), 99_162_322);
        // Past i32: wraps as Java's int does.
        assert_eq!(string_hash("connect.parameters"), 958_501_230);
        assert_eq!(string_hash("polygenelubricants"), i32::MIN);
    }

    #[test]
    fn iteration_order_is_javas() {
        // Printed by Java 17: `new HashMap<>()` with these keys put in this order, then `keySet()`.
        assert_eq!(
            keys(&["connect.type", "connect.version", "connect.parameters", "connect.index"], Made::Default),
            ["connect.version", "connect.index", "connect.type", "connect.parameters"]
        );
        // `new HashMap<>(m)` of the above (8 buckets for four keys).
        assert_eq!(
            keys(&["connect.version", "connect.index", "connect.type", "connect.parameters"], Made::WithCapacity(6)),
            ["connect.index", "connect.version", "connect.type", "connect.parameters"]
        );
    }

    #[test]
    fn a_full_table_doubles() {
        // Printed by Java 17: 15 keys pass 16 * 0.75, so the order is that of 32 buckets.
        let fields = [
            "id",
            "aggregatetype",
            "aggregateid",
            "type",
            "timestamp",
            "payload",
            "tracingspanid",
            "name",
            "description",
            "weight",
            "quantity",
            "price",
            "created_at",
            "updated_at",
            "customer",
        ];
        assert_eq!(
            keys(&fields, Made::Default),
            [
                "quantity",
                "description",
                "weight",
                "created_at",
                "type",
                "aggregateid",
                "tracingspanid",
                "updated_at",
                "payload",
                "price",
                "name",
                "id",
                "aggregatetype",
                "timestamp",
                "customer",
            ]
        );
        assert_eq!(keys(&fields[..5], Made::Default), ["aggregateid", "id", "type", "aggregatetype", "timestamp"]);
        assert_eq!(keys(&["key", "value"], Made::Default), ["value", "key"]);
        assert_eq!(
            keys(&["scale", "connect.decimal.precision"], Made::WithCapacity(2)),
            ["scale", "connect.decimal.precision"]
        );
    }
}
