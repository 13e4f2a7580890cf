//! `RegexRouter`'s topic rewrite: a full match of the regex against the topic (or the Event
//! Router's route-by value), then Java's `Matcher.replaceFirst(replacement)`; a value that does not
//! match is kept unchanged.

use regex::{Captures, Regex};

/// Expands a Java replacement string: `$n` (longest group number that exists), `${name}`, and
/// backslash-escaped characters. Errors like Java's IllegalArgumentException, with a reason.
pub fn expand_java_replacement(caps: &Captures<'_>, regex: &Regex, replacement: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next().ok_or("character to be escaped is missing")?),
            '$' => match chars.peek().copied() {
                Some('{') => {
                    chars.next();
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(ch) if ch.is_ascii_alphanumeric() => name.push(ch),
                            _ => return Err("named capturing group is missing trailing '}'".to_string()),
                        }
                    }
                    if !regex.capture_names().flatten().any(|n| n == name) {
                        return Err(format!("no group with name {{{name}}}"));
                    }
                    out.push_str(caps.name(&name).map_or("", |m| m.as_str()));
                }
                Some(d) if d.is_ascii_digit() => {
                    chars.next();
                    let mut group = d.to_digit(10).unwrap_or(0) as usize;
                    if group >= caps.len() {
                        return Err(format!("no group {group}"));
                    }
                    // Java keeps taking digits while the longer number is still a group.
                    while let Some(n) = chars.peek().and_then(|c| c.to_digit(10)) {
                        let longer = group * 10 + n as usize;
                        if longer >= caps.len() {
                            break;
                        }
                        group = longer;
                        chars.next();
                    }
                    out.push_str(caps.get(group).map_or("", |m| m.as_str()));
                }
                _ => return Err("illegal group reference".to_string()),
            },
            other => out.push(other),
        }
    }
    Ok(out)
}

/// The topic for a route-by value. `regex` must be anchored (the config anchors it).
pub fn route(regex: &Regex, replacement: &str, value: &str) -> Result<String, String> {
    match regex.captures(value) {
        Some(caps) => expand_java_replacement(&caps, regex, replacement),
        None => Ok(value.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anchored(p: &str) -> Regex {
        Regex::new(&format!("^(?:{p})$")).unwrap()
    }

    #[test]
    fn default_routing_prefixes_the_aggregate_type() {
        let re = anchored("(?<routedByValue>.*)");
        assert_eq!(route(&re, "outbox.event.${routedByValue}", "Order").unwrap(), "outbox.event.Order");
        assert_eq!(route(&re, "outbox.event.${routedByValue}", "a.b-C_d").unwrap(), "outbox.event.a.b-C_d");
    }

    #[test]
    fn non_matching_value_is_kept_raw() {
        let re = anchored("(.*)Aggregate");
        assert_eq!(route(&re, "$1.events", "OrderAggregate").unwrap(), "Order.events");
        assert_eq!(route(&re, "$1.events", "Customer").unwrap(), "Customer");
        assert_eq!(route(&re, "$1.events", "OrderAggregateX").unwrap(), "OrderAggregateX", "full match only");
    }

    #[test]
    fn java_replacement_syntax() {
        let re = anchored("(a)(b)");
        assert_eq!(route(&re, "$2$1\\$x", "ab").unwrap(), "ba$x");
        assert_eq!(route(&re, "$12", "ab").unwrap(), "a2", "group 12 does not exist, so $1 then '2'");
        assert!(route(&re, "$3", "ab").is_err());
        assert!(route(&re, "${nope}", "ab").is_err());
        assert!(route(&re, "$x", "ab").is_err());
    }
}
