//! The names Debezium gives a table's schemas: the data-change topic name its topic naming strategy
//! builds (`AbstractTopicNamingStrategy`: `topic.prefix`, schema and table joined by
//! `topic.delimiter`, then made a legal Kafka topic name), adjusted by `schema.name.adjustment.mode`
//! (`SchemaNameAdjuster`). The Event Router names its envelope struct after it.
//!
//! Java works on UTF-16 code units, so a character outside the Basic Multilingual Plane is two
//! invalid units here too, each replaced.

use std::borrow::Cow;

/// `schema.name.adjustment.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaNameAdjustment {
    /// `none` (Debezium's default since 2.0): names as built.
    #[default]
    None,
    /// `avro`: each character Avro does not allow becomes `_` (a leading digit keeps itself after
    /// it: `1a` is `_1a`).
    Avro,
    /// `avro_unicode`: each character Avro does not allow, `_` included, becomes `_u` and its
    /// UTF-16 code in lower-case hex (`-` is `_u002d`).
    AvroUnicode,
}

/// Kafka's longest topic name (`TopicNamingStrategy.MAX_NAME_LENGTH`).
const MAX_TOPIC_NAME: usize = 249;

/// `topic.naming.strategy`: how a table's data-change topic name is made legal. Debezium's
/// `SchemaTopicNamingStrategy` (PostgreSQL's default) and `DefaultTopicNamingStrategy` name a
/// pgoutput table alike (its catalog is null), and so do their Unicode variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TopicNaming {
    /// Each character Kafka does not allow becomes `_`.
    #[default]
    Underscore,
    /// `SchemaUnicodeTopicNamingStrategy`, `DefaultUnicodeTopicNamingStrategy`: each character
    /// Kafka does not allow, and `_`, becomes `_u` and its UTF-16 code.
    Unicode,
}

impl TopicNaming {
    /// The strategy a `topic.naming.strategy` class names, if pgoutbox names topics as it does.
    pub fn parse(class: &str) -> Option<TopicNaming> {
        match class.trim() {
            "io.debezium.schema.SchemaTopicNamingStrategy" | "io.debezium.schema.DefaultTopicNamingStrategy" => {
                Some(TopicNaming::Underscore)
            }
            "io.debezium.schema.SchemaUnicodeTopicNamingStrategy"
            | "io.debezium.schema.DefaultUnicodeTopicNamingStrategy" => Some(TopicNaming::Unicode),
            _ => None,
        }
    }
}

/// `_u` and Java's `Integer.toHexString` of a UTF-16 unit, with "00" before one or two digits
/// (`UnicodeReplacementFunction`).
fn push_unicode(out: &mut String, unit: u16) {
    let hex = format!("{unit:x}");
    out.push_str("_u");
    if hex.len() <= 2 {
        out.push_str("00");
    }
    out.push_str(&hex);
}

/// The replacement of a character a name cannot hold: `_`, or `_u` and its code (`unicode`), once
/// per UTF-16 unit, as Java's loops over chars write them.
fn push_replaced(out: &mut String, c: char, unicode: bool) {
    let mut units = [0u16; 2];
    for unit in c.encode_utf16(&mut units).iter() {
        if unicode {
            push_unicode(out, *unit);
        } else {
            out.push('_');
        }
    }
}

/// Java's `String.trim().isEmpty()`: only characters up to U+0020 count as blank.
fn is_blank(s: &str) -> bool {
    s.chars().all(|c| c <= ' ')
}

impl SchemaNameAdjustment {
    /// The value as Debezium's enum parses it: trimmed, any case.
    pub fn parse(value: &str) -> Option<SchemaNameAdjustment> {
        match value.trim().to_ascii_lowercase().as_str() {
            "none" => Some(SchemaNameAdjustment::None),
            "avro" => Some(SchemaNameAdjustment::Avro),
            "avro_unicode" => Some(SchemaNameAdjustment::AvroUnicode),
            _ => None,
        }
    }

    /// `name` made a valid Avro full name (`SchemaNameAdjuster.validFullname`).
    pub fn adjust(self, name: &str) -> Cow<'_, str> {
        let unicode = match self {
            SchemaNameAdjustment::None => return Cow::Borrowed(name),
            SchemaNameAdjustment::Avro => false,
            SchemaNameAdjustment::AvroUnicode => true,
        };
        let valid_first = |c: char| c.is_ascii_alphabetic() || (c == '_' && !unicode);
        let valid_next = |c: char| valid_first(c) || c == '.' || c.is_ascii_digit();
        if name.chars().enumerate().all(|(i, c)| if i == 0 { valid_first(c) } else { valid_next(c) }) {
            return Cow::Borrowed(name);
        }
        let mut out = String::with_capacity(name.len() + 8);
        for (i, c) in name.chars().enumerate() {
            if (i == 0 && valid_first(c)) || (i > 0 && valid_next(c)) {
                out.push(c);
                continue;
            }
            push_replaced(&mut out, c, unicode);
            // The underscore replacement keeps a leading digit after its `_`.
            if i == 0 && !unicode && c.is_ascii_digit() {
                out.push(c);
            }
        }
        Cow::Owned(out)
    }
}

/// The data-change topic name of a table (`AbstractTopicNamingStrategy.dataChangeTopic` and
/// `sanitizedTopicName`): the blank parts left out, the rest joined by `delimiter`, then each
/// character Kafka does not allow in a topic name replaced as `naming` replaces it, cut to 249
/// characters, and `.` or `..` replaced.
pub fn data_change_topic(prefix: &str, schema: &str, table: &str, delimiter: &str, naming: TopicNaming) -> String {
    let joined = [prefix, schema, table].iter().filter(|p| !is_blank(p)).copied().collect::<Vec<_>>().join(delimiter);
    let unicode = naming == TopicNaming::Unicode;
    let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-') || (c == '_' && !unicode);
    let mut name = String::with_capacity(joined.len());
    for c in joined.chars() {
        if legal(c) {
            name.push(c);
        } else {
            push_replaced(&mut name, c, unicode);
        }
    }
    // Only ASCII is left: characters are bytes.
    name.truncate(MAX_TOPIC_NAME);
    if name == "." || name == ".." {
        let mut dots = String::new();
        for _ in 0..name.len() {
            push_replaced(&mut dots, '.', unicode);
        }
        return dots;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avro_replaces_what_avro_names_do_not_allow_as_debeziums_adjuster_does() {
        let avro = SchemaNameAdjustment::Avro;
        assert_eq!(avro.adjust("dbserver1.public.outbox"), "dbserver1.public.outbox");
        assert!(matches!(avro.adjust("dbserver1.public.outbox"), Cow::Borrowed(_)));
        assert_eq!(avro.adjust("my-server.public.outbox"), "my_server.public.outbox");
        assert_eq!(avro.adjust("1server.public.outbox"), "_1server.public.outbox");
        assert_eq!(avro.adjust(".x"), "_x");
        assert_eq!(avro.adjust("a.Ümlaut$x"), "a._mlaut_x");
        // A character beyond the BMP is two UTF-16 units, two replacements.
        assert_eq!(avro.adjust("a😀b"), "a__b");
        assert_eq!(avro.adjust("_ok_1"), "_ok_1");
    }

    #[test]
    fn avro_unicode_writes_the_utf16_code_of_each_replaced_character() {
        let u = SchemaNameAdjustment::AvroUnicode;
        assert_eq!(u.adjust("my-server.public.outbox"), "my_u002dserver.public.outbox");
        // `_` is the escape character itself, so it is replaced too, first or not.
        assert_eq!(u.adjust("my_server"), "my_u005fserver");
        assert_eq!(u.adjust("_x"), "_u005fx");
        // No digit kept after a leading digit's code; "00" only before one or two hex digits.
        assert_eq!(u.adjust("1a"), "_u0031a");
        assert_eq!(u.adjust("a\tb"), "a_u009b");
        assert_eq!(u.adjust("aÜb"), "a_u00dcb");
        assert_eq!(u.adjust("a€b"), "a_u20acb");
        assert_eq!(u.adjust("a😀b"), "a_ud83d_ude00b");
    }

    #[test]
    fn none_and_parsing() {
        assert_eq!(SchemaNameAdjustment::None.adjust("my-server.x"), "my-server.x");
        assert_eq!(SchemaNameAdjustment::parse(" AVRO "), Some(SchemaNameAdjustment::Avro));
        assert_eq!(SchemaNameAdjustment::parse("avro_unicode"), Some(SchemaNameAdjustment::AvroUnicode));
        assert_eq!(SchemaNameAdjustment::parse("None"), Some(SchemaNameAdjustment::None));
        assert_eq!(SchemaNameAdjustment::parse("avro-unicode"), None);
    }

    #[test]
    fn data_change_topic_is_a_legal_kafka_topic_name() {
        let topic = |p: &str, s: &str, t: &str, d: &str| data_change_topic(p, s, t, d, TopicNaming::Underscore);
        assert_eq!(topic("dbserver1", "public", "outbox", "."), "dbserver1.public.outbox");
        assert_eq!(topic("my-server", "public", "outbox", "_"), "my-server_public_outbox");
        assert_eq!(topic("s", "Sales Dept", "Ümlaut😀", "."), "s.Sales_Dept._mlaut__");
        assert_eq!(topic("p", "", "t", "."), "p.t");
        assert_eq!(topic(&"x".repeat(300), "public", "outbox", ".").len(), 249);
        assert_eq!(topic(".", "", "", "."), "_");
        // Java's trim: a no-break space is not blank, a control character is.
        assert_eq!(topic("p", "\u{a0}", "t", "."), "p._.t");
        assert_eq!(topic("p", "\u{1}", "t", "."), "p.t");
    }

    #[test]
    fn unicode_topic_naming_writes_codes_for_underscores_too() {
        let topic = |p: &str, s: &str, t: &str| data_change_topic(p, s, t, ".", TopicNaming::Unicode);
        assert_eq!(topic("my_server", "public", "out box"), "my_u005fserver.public.out_u0020box");
        assert_eq!(topic("p", "s", "Ü"), "p.s._u00dc");
        assert_eq!(topic("..", "", ""), "_u002e_u002e");
        assert_eq!(
            TopicNaming::parse("io.debezium.schema.DefaultUnicodeTopicNamingStrategy"),
            Some(TopicNaming::Unicode)
        );
        assert_eq!(TopicNaming::parse(" io.debezium.schema.SchemaTopicNamingStrategy "), Some(TopicNaming::Underscore));
        assert_eq!(TopicNaming::parse("io.debezium.schema.SchemaRegexTopicNamingStrategy"), None);
    }
}
