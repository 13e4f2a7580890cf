//! PostgreSQL's text of a one-dimensional array.

/// A one-dimensional array literal as PostgreSQL prints it (`{a,"b c",NULL,"q\"x"}`): the elements,
/// `None` for an unquoted NULL. `None` for anything else (nested arrays, explicit bounds).
pub fn parse(text: &str) -> Option<Vec<Option<String>>> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    let mut items = Vec::new();
    if inner.is_empty() {
        return Some(items);
    }
    let mut chars = inner.chars().peekable();
    loop {
        if chars.peek() == Some(&'"') {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => s.push(chars.next()?),
                    c => s.push(c),
                }
            }
            items.push(Some(s));
        } else {
            let mut s = String::new();
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                if c == '{' || c == '"' || c == '\\' {
                    return None;
                }
                s.push(c);
                chars.next();
            }
            items.push(if s == "NULL" { None } else { Some(s) });
        }
        match chars.next() {
            None => return Some(items),
            Some(',') => {}
            Some(_) => return None,
        }
    }
}
