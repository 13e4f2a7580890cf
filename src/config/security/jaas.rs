//! `sasl.jaas.config` as Kafka's Java client reads it (`org.apache.kafka.common.security.JaasConfig`,
//! on `java.io.StreamTokenizer`): exactly one entry
//! `<LoginModule class> <required|requisite|sufficient|optional> (<name>=<value>)* ;`
//! where a value is a word or a string in `"` or `'` with backslash escapes, and `//` and `/* */`
//! comments count as white space.
//!
//! Errors say where the text is wrong, never what it holds: it holds a password.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    pub module: String,
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JaasError {
    #[error("the JAAS config is empty; write <LoginModule> required username=\"...\" password=\"...\";")]
    Empty,
    #[error("the JAAS config does not start with a login module class name")]
    NoModule,
    #[error("the JAAS config's login module has no control flag (required, requisite, sufficient or optional) after its class name")]
    NoFlag,
    #[error("option {0} of the JAAS config is not of the form name=value (strings in double quotes)")]
    BadOption(usize),
    #[error("a quoted value in the JAAS config is not closed")]
    Unterminated,
    #[error("the JAAS config entry is not terminated by a semicolon; end it with `;`")]
    NoSemicolon,
    #[error("the JAAS config holds {0} login modules; Kafka clients take exactly one")]
    Several(usize),
    #[error("the JAAS file is not a list of `Name {{ <LoginModule> <flag> options; }};` sections")]
    NoSection,
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Char(char),
}

/// StreamTokenizer's word characters as Kafka configures them: letters, digits, `.` (numbers are
/// parsed into words' tails as well), `-`, `_`, `$`, and everything above 127.
fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '$') || (c as u32) > 127
}

fn tokens(text: &str) -> Result<Vec<Token>, JaasError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if (c as u32) <= 32 {
            i += 1;
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' && chars[i] != '\r' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
        } else if c == '"' || c == '\'' {
            let (s, next) = quoted(&chars, i + 1, c)?;
            out.push(Token::Quoted(s));
            i = next;
        } else if is_word(c) {
            let start = i;
            while i < chars.len() && is_word(chars[i]) {
                i += 1;
            }
            out.push(Token::Word(chars[start..i].iter().collect()));
        } else {
            out.push(Token::Char(c));
            i += 1;
        }
    }
    Ok(out)
}

/// A quoted string from `start` (just after the opening quote) to the closing `quote`, with
/// StreamTokenizer's escapes: `\n \t \r \b \f \a \v`, octal `\0`-`\377`, and any other character
/// stands for itself (`\"`, `\\`).
fn quoted(chars: &[char], start: usize, quote: char) -> Result<(String, usize), JaasError> {
    let mut s = String::new();
    let mut i = start;
    loop {
        let Some(&c) = chars.get(i) else { return Err(JaasError::Unterminated) };
        i += 1;
        if c == quote {
            return Ok((s, i));
        }
        if c == '\n' || c == '\r' {
            return Err(JaasError::Unterminated);
        }
        if c != '\\' {
            s.push(c);
            continue;
        }
        let Some(&e) = chars.get(i) else { return Err(JaasError::Unterminated) };
        i += 1;
        match e {
            'n' => s.push('\n'),
            't' => s.push('\t'),
            'r' => s.push('\r'),
            'b' => s.push('\u{8}'),
            'f' => s.push('\u{c}'),
            'a' => s.push('\u{7}'),
            'v' => s.push('\u{b}'),
            '0'..='7' => {
                // Up to three octal digits, at most \377.
                let mut n = e.to_digit(8).unwrap_or(0);
                let max_digits = if e <= '3' { 3 } else { 2 };
                let mut digits = 1;
                while digits < max_digits {
                    match chars.get(i).and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            n = n * 8 + d;
                            i += 1;
                            digits += 1;
                        }
                        None => break,
                    }
                }
                s.push(char::from_u32(n).unwrap_or('\u{fffd}'));
            }
            other => s.push(other),
        }
    }
}

pub fn parse(text: &str) -> Result<Login, JaasError> {
    let tokens = tokens(text)?;
    if tokens.is_empty() {
        return Err(JaasError::Empty);
    }
    let mut it = tokens.into_iter().peekable();
    let mut logins = entries(&mut it)?;
    if it.peek().is_some() {
        return Err(JaasError::NoModule);
    }
    if logins.len() > 1 {
        return Err(JaasError::Several(logins.len()));
    }
    Ok(logins.remove(0))
}

/// A JAAS login configuration file (`-Djava.security.auth.login.config=FILE`), as Java's
/// `ConfigFile` reads it: sections `Name { <LoginModule> <flag> options; ... };`, by name.
pub fn parse_file(text: &str) -> Result<BTreeMap<String, Vec<Login>>, JaasError> {
    let mut it = tokens(text)?.into_iter().peekable();
    let mut sections = BTreeMap::new();
    while let Some(t) = it.next() {
        let (Token::Word(name), Some(Token::Char('{'))) = (t, it.next()) else { return Err(JaasError::NoSection) };
        let logins = entries(&mut it)?;
        if it.next() != Some(Token::Char('}')) || it.next() != Some(Token::Char(';')) {
            return Err(JaasError::NoSection);
        }
        sections.insert(name, logins);
    }
    Ok(sections)
}

/// Login module entries up to the end of the text or a section's closing `}`.
fn entries(it: &mut std::iter::Peekable<std::vec::IntoIter<Token>>) -> Result<Vec<Login>, JaasError> {
    let mut logins = Vec::new();
    while it.peek().is_some_and(|t| *t != Token::Char('}')) {
        let Some(Token::Word(module)) = it.next() else { return Err(JaasError::NoModule) };
        let flag = match it.next() {
            Some(Token::Word(f))
                if ["required", "requisite", "sufficient", "optional"].contains(&f.to_ascii_lowercase().as_str()) =>
            {
                f.to_ascii_lowercase()
            }
            _ => return Err(JaasError::NoFlag),
        };
        let mut options = BTreeMap::new();
        loop {
            match it.next() {
                Some(Token::Char(';')) => break,
                Some(Token::Word(name)) => {
                    let n = options.len() + 1;
                    if it.next() != Some(Token::Char('=')) {
                        return Err(JaasError::BadOption(n));
                    }
                    let value = match it.next() {
                        Some(Token::Word(v)) | Some(Token::Quoted(v)) => v,
                        _ => return Err(JaasError::BadOption(n)),
                    };
                    options.insert(name, value);
                }
                None => return Err(JaasError::NoSemicolon),
                Some(_) => return Err(JaasError::BadOption(options.len() + 1)),
            }
        }
        logins.push(Login { module, flag, options });
    }
    if logins.is_empty() {
        return Err(JaasError::Empty);
    }
    Ok(logins)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(l: &Login) -> Vec<(&str, &str)> {
        l.options.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    #[test]
    fn jaas_plain_and_scram_entries_give_username_and_password() {
        let l = parse(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cr;et";"#,
        )
        .unwrap();
        assert_eq!(l.module, "org.apache.kafka.common.security.plain.PlainLoginModule");
        assert_eq!(l.flag, "required");
        assert_eq!(opts(&l), [("password", "s3cr;et"), ("username", "alice")]);
        let l = parse(
            "org.apache.kafka.common.security.scram.ScramLoginModule Required\n  username=bob\n  password='it''s';",
        )
        .unwrap_err();
        assert_eq!(l, JaasError::BadOption(3), "two adjacent quoted strings are not one value");
        let l = parse(
            "org.apache.kafka.common.security.scram.ScramLoginModule Required username=bob.smith password='p w';",
        )
        .unwrap();
        assert_eq!(opts(&l), [("password", "p w"), ("username", "bob.smith")]);
    }

    #[test]
    fn jaas_escapes_and_comments_follow_the_java_tokenizer() {
        let l =
            parse("/* leading */ M required // to the end of the line\n password=\"a\\\"b\\\\c\\td\\101\" user=\"\";")
                .unwrap();
        assert_eq!(l.options["password"], "a\"b\\c\tdA");
        assert_eq!(l.options["user"], "");
        assert_eq!(parse("M optional;").unwrap().options.len(), 0);
    }

    #[test]
    fn jaas_errors_name_the_fault_not_the_secret() {
        let secret = "hunter2-very-secret";
        let cases = [
            (format!("M required password=\"{secret}\""), JaasError::NoSemicolon),
            (format!("M password=\"{secret}\";"), JaasError::NoFlag),
            (format!("M required password=\"{secret};"), JaasError::Unterminated),
            (format!("M required password \"{secret}\";"), JaasError::BadOption(1)),
            (format!("M required a=\"{secret}\"; N required b=\"x\";"), JaasError::Several(2)),
            ("  ".to_string(), JaasError::Empty),
            (format!("\"{secret}\" required;"), JaasError::NoModule),
        ];
        for (text, expected) in cases {
            let e = parse(&text).unwrap_err();
            assert_eq!(e, expected, "{text}");
            assert!(!e.to_string().contains(secret));
        }
    }

    #[test]
    fn jaas_file_sections_as_connect_operators_write_them() {
        let text = r#"
            // Connect's REST basic auth
            KafkaConnect {
                org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required
                file="/etc/kafka/connect.password";
            };
            KafkaClient { org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p"; };
        "#;
        let s = parse_file(text).unwrap();
        let connect = &s["KafkaConnect"][0];
        assert_eq!(connect.module, "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule");
        assert_eq!(connect.options["file"], "/etc/kafka/connect.password");
        assert_eq!(s["KafkaClient"][0].options["username"], "u");
        assert_eq!(parse_file("KafkaConnect { x required; }"), Err(JaasError::NoSection));
        assert_eq!(parse_file("KafkaConnect x required; };"), Err(JaasError::NoSection));
    }
}
