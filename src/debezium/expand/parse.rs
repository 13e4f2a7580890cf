//! The JSON reader Debezium's expansion uses: Jackson's `ObjectMapper.readTree` with default settings,
//! reduced to what the schema inference needs to know about each node.
//!
//! What Jackson 2.21 (Debezium 3.6.3's) does, and so this reader:
//! - strict RFC 8259 grammar: no comments, no trailing commas, no leading zeros, no `NaN`; whitespace is
//!   space, tab, CR, LF only; control characters inside strings must be escaped.
//! - reads one root value and ignores whatever follows it (`FAIL_ON_TRAILING_TOKENS` is off).
//! - a repeated object key keeps its first position and its last value.
//! - integers become `int` if they fit, else `long`, else `BigInteger`; any number with a fraction or
//!   exponent becomes a `double` (`Double.parseDouble`, so `1e400` is infinite).
//! - `StreamReadConstraints` defaults: nesting depth at most 1000, at most 1000 digits in a number,
//!   names of at most 50,000 and strings of at most 20,000,000 UTF-16 units. Beyond them `readTree`
//!   throws, and Debezium keeps the payload as a string (all boundaries checked against Debezium 3.6.3).
//!   Reading, inferring and writing recurse once per level: at depth 1000 that is about 0.8 MiB of
//!   stack in a release build (tokio's worker threads have 2 MiB), about 2.3 MiB in a debug build.
//! - `\u` escapes may produce lone surrogates (PostgreSQL's `json` type accepts `"\ud800"`, `jsonb`
//!   does not); strings keep them as generalised UTF-8 (`ED A0 80`), which `connect::write_string`
//!   writes back as `\uD800` exactly as Jackson does.

const MAX_DEPTH: usize = 1000;
const MAX_NUMBER_DIGITS: usize = 1000;
const MAX_NAME_UNITS: usize = 50_000;
const MAX_STRING_UNITS: usize = 20_000_000;

use std::borrow::Cow;

/// A Jackson `JsonNode`, as far as `JsonSchemaData` distinguishes them.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node<'a> {
    Null,
    Bool(bool),
    /// `IntNode`
    Int(i32),
    /// `LongNode`
    Long(i64),
    /// `BigIntegerNode`: an integer beyond 64 bits.
    BigInt,
    /// `DoubleNode`
    Double(f64),
    /// UTF-8, or generalised UTF-8 when a lone surrogate was escaped; borrowed from the text
    /// unless it had escapes.
    String(Cow<'a, [u8]>),
    Array(Vec<Node<'a>>),
    /// Keys in document order, each once.
    Object(Vec<(Cow<'a, [u8]>, Node<'a>)>),
}

impl Node<'_> {
    /// Jackson's `JsonNodeType`, which array homogeneity compares.
    pub(super) fn kind(&self) -> u8 {
        match self {
            Node::Null => 0,
            Node::Bool(_) => 1,
            Node::Int(_) | Node::Long(_) | Node::BigInt | Node::Double(_) => 2,
            Node::String(_) => 3,
            Node::Array(_) => 4,
            Node::Object(_) => 5,
        }
    }

    pub(super) fn is_number(&self) -> bool {
        matches!(self, Node::Int(_) | Node::Long(_) | Node::BigInt | Node::Double(_))
    }
}

/// Why `readTree` throws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SyntaxError {
    pub offset: usize,
    pub reason: &'static str,
}

/// Reads the root value at the start of `text`; what follows it is ignored.
pub(super) fn read_tree(text: &str) -> Result<Node<'_>, SyntaxError> {
    let mut r = Reader { s: text.as_bytes(), pos: 0, depth: 0 };
    r.skip_ws();
    r.value()
}

struct Reader<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
}

impl<'a> Reader<'a> {
    fn err<T>(&self, reason: &'static str) -> Result<T, SyntaxError> {
        Err(SyntaxError { offset: self.pos, reason })
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> Result<Node<'a>, SyntaxError> {
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            _ => self.scalar(),
        }
    }

    #[inline(never)]
    fn scalar(&mut self) -> Result<Node<'a>, SyntaxError> {
        match self.peek() {
            Some(b'"') => Ok(Node::String(self.string(MAX_STRING_UNITS)?)),
            Some(b't') => self.literal(b"true", Node::Bool(true)),
            Some(b'f') => self.literal(b"false", Node::Bool(false)),
            Some(b'n') => self.literal(b"null", Node::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => self.err("unexpected character, expected a value"),
            None => self.err("unexpected end of input"),
        }
    }

    fn literal(&mut self, word: &'static [u8], node: Node<'a>) -> Result<Node<'a>, SyntaxError> {
        if !self.s[self.pos..].starts_with(word) {
            return self.err("unrecognized token");
        }
        self.pos += word.len();
        // Jackson refuses `truex`; any other character is left to the grammar.
        if matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80) {
            return self.err("unrecognized token");
        }
        Ok(node)
    }

    fn enter(&mut self) -> Result<(), SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("nesting depth exceeds 1000");
        }
        self.pos += 1;
        self.skip_ws();
        Ok(())
    }

    /// After a member: `true` at `,`, `false` at the closing byte (consumed, leaving the level).
    /// The container functions recurse once per level, so they keep their frames small and leave
    /// everything else to helpers like this one.
    #[inline(never)]
    fn next_member(&mut self, close: u8) -> Result<bool, SyntaxError> {
        self.skip_ws();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                self.skip_ws();
                Ok(true)
            }
            Some(c) if c == close => {
                self.pos += 1;
                self.depth -= 1;
                Ok(false)
            }
            _ => self.err(if close == b']' { "expected `,` or `]`" } else { "expected `,` or `}`" }),
        }
    }

    /// An empty container right after its opening byte: consumes the closing byte.
    #[inline(never)]
    fn empty(&mut self, close: u8) -> bool {
        if self.peek() != Some(close) {
            return false;
        }
        self.pos += 1;
        self.depth -= 1;
        true
    }

    fn array(&mut self) -> Result<Node<'a>, SyntaxError> {
        self.enter()?;
        let mut elems = Vec::new();
        if !self.empty(b']') {
            loop {
                elems.push(self.value()?);
                if !self.next_member(b']')? {
                    break;
                }
            }
        }
        Ok(Node::Array(elems))
    }

    fn object(&mut self) -> Result<Node<'a>, SyntaxError> {
        self.enter()?;
        let mut members = Members::default();
        if !self.empty(b'}') {
            loop {
                let key = self.key()?;
                let value = self.value()?;
                members.insert(key, value);
                if !self.next_member(b'}')? {
                    break;
                }
            }
        }
        Ok(Node::Object(members.fields))
    }

    /// A field name and its `:`.
    #[inline(never)]
    fn key(&mut self) -> Result<Cow<'a, [u8]>, SyntaxError> {
        if self.peek() != Some(b'"') {
            return self.err("expected a field name");
        }
        let key = self.string(MAX_NAME_UNITS)?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return self.err("expected `:`");
        }
        self.pos += 1;
        self.skip_ws();
        Ok(key)
    }

    /// A string literal, decoded; `max_units` is Jackson's limit in UTF-16 units. Borrowed from
    /// the text when it has no escape (the usual case: no copy).
    fn string(&mut self, max_units: usize) -> Result<Cow<'a, [u8]>, SyntaxError> {
        self.pos += 1;
        let start = self.pos;
        let s = self.s;
        let end = s[start..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).map(|n| start + n);
        if let Some(end) = end.filter(|&e| s[e] == b'"') {
            self.pos = end + 1;
            let run = &s[start..end];
            // UTF-16 units never outnumber bytes: count them only for a long string.
            if run.len() > max_units && utf16_units(run) > max_units {
                return self.err("string or name longer than Jackson allows");
            }
            return Ok(Cow::Borrowed(run));
        }
        self.escaped_string(max_units).map(Cow::Owned)
    }

    /// A string with escapes (or unterminated, or holding a control character), from its start.
    #[inline(never)]
    fn escaped_string(&mut self, max_units: usize) -> Result<Vec<u8>, SyntaxError> {
        let mut out = Vec::new();
        let mut units = 0usize;
        loop {
            let start = self.pos;
            while matches!(self.peek(), Some(c) if c != b'"' && c != b'\\' && c >= 0x20) {
                self.pos += 1;
            }
            let run = &self.s[start..self.pos];
            units += utf16_units(run);
            out.extend_from_slice(run);
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    break;
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                    units += 1;
                }
                Some(_) => return self.err("unescaped control character in string"),
                None => return self.err("unterminated string"),
            }
        }
        if units > max_units {
            return self.err("string or name longer than Jackson allows");
        }
        Ok(out)
    }

    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), SyntaxError> {
        let c = match self.peek() {
            Some(b'"') => b'"',
            Some(b'\\') => b'\\',
            Some(b'/') => b'/',
            Some(b'b') => 0x08,
            Some(b'f') => 0x0C,
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            Some(b'u') => {
                self.pos += 1;
                let unit = self.hex4()?;
                // A high surrogate escape followed by a low one is one character.
                if (0xD800..0xDC00).contains(&unit) && self.s[self.pos..].starts_with(b"\\u") {
                    let save = self.pos;
                    self.pos += 2;
                    let low = self.hex4()?;
                    if (0xDC00..0xE000).contains(&low) {
                        let cp = 0x1_0000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                        push_code_point(out, cp);
                        return Ok(());
                    }
                    self.pos = save;
                }
                push_code_point(out, u32::from(unit));
                return Ok(());
            }
            _ => return self.err("unrecognized character escape"),
        };
        self.pos += 1;
        out.push(c);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u16, SyntaxError> {
        let digits = self
            .s
            .get(self.pos..self.pos + 4)
            .ok_or(SyntaxError { offset: self.pos, reason: "unterminated \\u escape" })?;
        let mut v = 0u16;
        for &d in digits {
            let n = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return self.err("invalid \\u escape"),
            };
            v = v << 4 | u16::from(n);
        }
        self.pos += 4;
        Ok(v)
    }

    fn number(&mut self) -> Result<Node<'a>, SyntaxError> {
        let start = self.pos;
        let mut digits = 0usize;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                digits += 1;
                if matches!(self.peek(), Some(b'0'..=b'9')) {
                    return self.err("leading zeroes not allowed");
                }
            }
            Some(b'1'..=b'9') => digits += self.digits(),
            _ => return self.err("expected a digit"),
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            float = true;
            let n = self.digits();
            if n == 0 {
                return self.err("expected a digit after the decimal point");
            }
            digits += n;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            float = true;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            let n = self.digits();
            if n == 0 {
                return self.err("expected a digit in the exponent");
            }
            digits += n;
        }
        if digits > MAX_NUMBER_DIGITS {
            return self.err("number longer than 1000 digits");
        }
        // The literal is ASCII digits and signs by construction.
        let literal = std::str::from_utf8(&self.s[start..self.pos])
            .map_err(|_| SyntaxError { offset: start, reason: "invalid number" })?;
        if float {
            return literal
                .parse::<f64>()
                .map(Node::Double)
                .map_err(|_| SyntaxError { offset: start, reason: "invalid number" });
        }
        Ok(match literal.parse::<i64>() {
            Ok(v) => i32::try_from(v).map_or(Node::Long(v), Node::Int),
            Err(_) => Node::BigInt,
        })
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }
}

/// An object's members as Jackson's `ObjectNode` keeps them: a repeated key (only a `json` column
/// can have one) keeps its first position and takes the last value.
#[derive(Default)]
struct Members<'a> {
    fields: Vec<(Cow<'a, [u8]>, Node<'a>)>,
    /// Past a few keys, repeats are found by hashing.
    index: Option<std::collections::HashMap<Cow<'a, [u8]>, usize>>,
}

impl<'a> Members<'a> {
    #[inline(never)]
    fn insert(&mut self, key: Cow<'a, [u8]>, value: Node<'a>) {
        if self.fields.len() >= 16 && self.index.is_none() {
            self.index = Some(self.fields.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect());
        }
        let existing = match &self.index {
            Some(map) => map.get(&key).copied(),
            None => self.fields.iter().position(|(k, _)| *k == key),
        };
        match existing {
            Some(i) => self.fields[i].1 = value,
            None => {
                if let Some(map) = &mut self.index {
                    map.insert(key.clone(), self.fields.len());
                }
                self.fields.push((key, value));
            }
        }
    }
}

/// UTF-16 units of UTF-8 text: one per character, two for the 4-byte ones.
fn utf16_units(run: &[u8]) -> usize {
    run.iter().filter(|&&b| b & 0xC0 != 0x80).count() + run.iter().filter(|&&b| b >= 0xF0).count()
}

/// UTF-8 of a code point; a surrogate gets the same three-byte form (generalised UTF-8).
fn push_code_point(out: &mut Vec<u8>, cp: u32) {
    match cp {
        0..=0x7F => out.push(cp as u8),
        0x80..=0x7FF => out.extend_from_slice(&[0xC0 | (cp >> 6) as u8, 0x80 | (cp & 0x3F) as u8]),
        0x800..=0xFFFF => {
            out.extend_from_slice(&[
                0xE0 | (cp >> 12) as u8,
                0x80 | ((cp >> 6) & 0x3F) as u8,
                0x80 | (cp & 0x3F) as u8,
            ]);
        }
        _ => out.extend_from_slice(&[
            0xF0 | (cp >> 18) as u8,
            0x80 | ((cp >> 12) & 0x3F) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]),
    }
}
