//! Kafka Connect's config providers: values such as `${file:/secrets/db.properties:password}`,
//! `${env:DB_PASSWORD}` or `${dir:/var/run/secrets/db:password}` are replaced before the config is
//! read, as Connect's `ConfigTransformer` does, by the providers the config declares:
//!
//! ```properties
//! config.providers=file,env,dir
//! config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
//! config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
//! config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider
//! config.providers.file.param.allowed.paths=/secrets
//! config.providers.env.param.allowlist.pattern=^DB_.*
//! ```
//!
//! The reference syntax is Connect's pattern `${provider:[path:]key}` (the first `:` ends the
//! provider, the second, if any, the path). Where Connect differs from what an operator needs, we
//! are stricter: a reference to a declared provider that does not resolve (a missing file, key or
//! variable) is an error naming the key, where Connect would keep the placeholder and send it as the
//! password. A reference to an undeclared provider stays literal, as in Connect, and is reported so
//! `check` can warn about it. Resolved values are secrets: no error or log shows them.
//!
//! `allowed.paths` is Kafka's `AllowedPaths`: the path is normalised lexically (`..` and `.` taken
//! out, as `Path.normalize`), checked, and the *normalised* path is what is read. Reading the path as
//! written would let `/allowed/link/../x` out: the kernel resolves `link/..` to the parent of the
//! symlink's target, not to `/allowed`.
//!
//! Who reads the error matters ([`Audience`]). The operator, who wrote the config, is told why a
//! reference has no value. A REST caller is not: a path outside `allowed.paths`, a variable outside
//! `allowlist.pattern`, a missing file, key or variable and an unreadable file all get one answer, so
//! the API cannot be used to learn what exists where the caller may not read (Kafka's providers
//! likewise read nothing outside `allowed.paths` and answer a forbidden path as a missing one). The
//! worker's log says which it was.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use regex::Regex;

use super::{invalid, parse_properties, ConfigError, RawConfig};

const FILE: &[&str] = &["org.apache.kafka.common.config.provider.FileConfigProvider"];
const ENV: &[&str] = &[
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
    // Strimzi's, older than Kafka's and with the same behaviour.
    "io.strimzi.kafka.EnvVarConfigProvider",
];
const DIR: &[&str] = &["org.apache.kafka.common.config.provider.DirectoryConfigProvider"];

#[derive(Debug)]
enum Provider {
    /// Keys of a Java properties file at the path.
    File { allowed: Option<Vec<PathBuf>> },
    /// Environment variables, the path must be empty.
    Env { allowlist: Regex },
    /// The content of the file named by the key in the directory at the path.
    Dir { allowed: Option<Vec<PathBuf>> },
}

/// The outcome: the config with references replaced, and the keys whose values keep a reference
/// to a provider that is not declared.
#[derive(Debug, Default)]
pub struct Resolved {
    pub raw: RawConfig,
    pub undeclared: Vec<(String, String)>,
}

/// Who is told why a reference has no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Whoever wrote the configuration on the worker's or relay's host (`run`, `check`, the worker's
    /// own properties): the error says why (outside allowed.paths, no such file, no such key, ...).
    Operator,
    /// A REST caller: every reason looks the same, and the reason goes to the log only.
    RestCaller,
}

/// Why a reference has no value.
enum Unresolved {
    /// The reference does not fit its provider (a path where none is taken, none where one is
    /// needed): a fact about what the caller wrote, told to anyone.
    Malformed(String),
    /// The provider gives nothing for it: not allowed, not there, or not readable. Told to the
    /// operator only.
    NoValue(String),
}

/// Keys that configure the providers themselves; they are not resolved.
pub fn is_provider_key(key: &str) -> bool {
    key == "config.providers" || key.starts_with("config.providers.")
}

/// Whether `value` is nothing but config-provider references (`${file:/s/db.properties:password}`):
/// it names where a secret is, not the secret, so an API may show it as it is.
pub fn is_reference_only(value: &str) -> bool {
    let rest = reference_pattern().replace_all(value.trim(), "");
    !value.trim().is_empty() && rest.is_empty()
}

fn reference_pattern() -> Regex {
    // Connect's ConfigTransformer.DEFAULT_PATTERN.
    Regex::new(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}").expect("a valid pattern")
}

/// [`resolve_for`] the operator.
pub fn resolve(raw: &RawConfig) -> Result<Resolved, ConfigError> {
    resolve_for(raw, Audience::Operator)
}

/// The config with every reference to a declared provider replaced by its value; an error naming the
/// key, with as much of the reason as `audience` may know, for the first one that has none.
pub fn resolve_for(raw: &RawConfig, audience: Audience) -> Result<Resolved, ConfigError> {
    let providers = declared(raw)?;
    let pattern = reference_pattern();
    let mut files: HashMap<PathBuf, BTreeMap<String, String>> = HashMap::new();
    let mut out = Resolved::default();
    out.raw.source_name = raw.source_name.clone();
    for (key, value) in &raw.entries {
        if is_provider_key(key) || !value.contains("${") {
            out.raw.entries.insert(key.clone(), value.clone());
            continue;
        }
        let mut resolved = String::with_capacity(value.len());
        let mut last = 0;
        for c in pattern.captures_iter(value) {
            let whole = c.get(0).expect("group 0 always matches");
            resolved.push_str(&value[last..whole.start()]);
            last = whole.end();
            let reference = Reference {
                key,
                text: whole.as_str(),
                alias: c.get(1).map_or("", |m| m.as_str()),
                path: c.get(2).map_or("", |m| m.as_str()),
                name: c.get(3).map_or("", |m| m.as_str()),
            };
            match providers.get(reference.alias) {
                None => {
                    out.undeclared.push((key.clone(), reference.alias.to_string()));
                    resolved.push_str(reference.text);
                }
                Some(p) => match lookup(&reference, p, &mut files) {
                    Ok(v) => resolved.push_str(&v),
                    Err(why) => return Err(unresolved(&reference, why, audience)),
                },
            }
        }
        resolved.push_str(&value[last..]);
        out.raw.entries.insert(key.clone(), resolved);
    }
    Ok(out)
}

fn declared(raw: &RawConfig) -> Result<HashMap<String, Provider>, ConfigError> {
    let mut out = HashMap::new();
    let Some(list) = raw.entries.get("config.providers") else { return Ok(out) };
    for alias in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let class_key = format!("config.providers.{alias}.class");
        let param = |name: &str| {
            raw.entries
                .get(&format!("config.providers.{alias}.param.{name}"))
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
        };
        let class = raw.entries.get(&class_key).map(|c| c.trim()).ok_or_else(|| {
            invalid(&class_key, "is missing: every provider listed in config.providers needs a class")
        })?;
        let allowed = |name: &str| -> Result<Option<Vec<PathBuf>>, ConfigError> {
            let Some(v) = param(name) else { return Ok(None) };
            let key = format!("config.providers.{alias}.param.{name}");
            v.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let path = PathBuf::from(p);
                    if path.is_absolute() {
                        Ok(normalize(&path))
                    } else {
                        Err(invalid(&key, "lists a path that is not absolute"))
                    }
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some)
        };
        let provider = if FILE.contains(&class) {
            Provider::File { allowed: allowed("allowed.paths")? }
        } else if DIR.contains(&class) {
            Provider::Dir { allowed: allowed("allowed.paths")? }
        } else if ENV.contains(&class) {
            let key = format!("config.providers.{alias}.param.allowlist.pattern");
            let pattern = param("allowlist.pattern").unwrap_or(".*");
            // Java's Pattern.matcher(name).matches(): the whole name.
            let allowlist = Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
                invalid(&key, format!("is not a valid regex: {}", crate::connect::config::regex_problem(&e)))
            })?;
            Provider::Env { allowlist }
        } else {
            return Err(invalid(
                &class_key,
                format!(
                    "is not a supported provider class; use {}, {} or {} (secrets managers: mount the secret as a file or an environment variable)",
                    FILE[0], ENV[0], DIR[0]
                ),
            ));
        };
        out.insert(alias.to_string(), provider);
    }
    Ok(out)
}

/// `path` with `.` and `..` taken out, without touching the file system (as Java's
/// `Path.normalize`), so `allowed.paths` cannot be escaped with `..`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The path to read for `path`, as Kafka's `AllowedPaths.parseUntrustedPath` gives it: without
/// `allowed.paths`, the path as written; with them, the normalised path if it lies under one of
/// them (the one checked is the one read), else `None`.
fn permitted(allowed: &Option<Vec<PathBuf>>, path: &Path) -> Option<PathBuf> {
    let Some(allowed) = allowed else { return Some(path.to_path_buf()) };
    let normal = normalize(path);
    allowed.iter().any(|a| normal.starts_with(a)).then_some(normal)
}

/// The error for a reference without a value, told as `audience` may be told it.
fn unresolved(r: &Reference<'_>, why: Unresolved, audience: Audience) -> ConfigError {
    let Reference { key, text, alias, .. } = *r;
    let why = match (why, audience) {
        (Unresolved::Malformed(why), _) | (Unresolved::NoValue(why), Audience::Operator) => why,
        (Unresolved::NoValue(why), Audience::RestCaller) => {
            // Debug-quoted: the reference and the paths in the reason are the caller's, and must
            // not forge log lines.
            tracing::warn!(key, reference = ?text, reason = ?why, "a config provider reference from a REST caller does not resolve");
            format!(
                "the provider `{alias}` has no value for it that it may read (a missing file, key or variable, and a path or name outside the provider's allowed.paths or allowlist.pattern, get this same answer; the worker's log says which)"
            )
        }
    };
    invalid(key, format!("{text} does not resolve: {why}"))
}

/// One `${alias:path:name}` in the value of `key`.
#[derive(Clone, Copy)]
struct Reference<'a> {
    key: &'a str,
    /// The reference as written.
    text: &'a str,
    alias: &'a str,
    path: &'a str,
    name: &'a str,
}

fn lookup(
    r: &Reference<'_>,
    provider: &Provider,
    files: &mut HashMap<PathBuf, BTreeMap<String, String>>,
) -> Result<String, Unresolved> {
    let Reference { alias, path, name, .. } = *r;
    let (malformed, no_value) = (Unresolved::Malformed, Unresolved::NoValue);
    match provider {
        Provider::Env { allowlist } => {
            if !path.is_empty() {
                return Err(malformed(format!("the env provider `{alias}` takes no path; write ${{{alias}:{name}}}")));
            }
            if !allowlist.is_match(name) {
                return Err(no_value(format!("`{name}` does not match the provider's allowlist.pattern")));
            }
            std::env::var(name).map_err(|_| no_value(format!("the environment variable `{name}` is not set")))
        }
        Provider::File { allowed } => {
            if path.is_empty() {
                return Err(malformed(format!(
                    "the file provider `{alias}` needs a path; write ${{{alias}:/path/to/file.properties:{name}}}"
                )));
            }
            let p = permitted(allowed, Path::new(path))
                .ok_or_else(|| no_value(format!("`{path}` is outside the provider's allowed.paths")))?;
            if !files.contains_key(&p) {
                let text =
                    std::fs::read_to_string(&p).map_err(|e| no_value(format!("cannot read `{}`: {e}", p.display())))?;
                files.insert(p.clone(), parse_properties(&text).entries);
            }
            files[&p].get(name).cloned().ok_or_else(|| no_value(format!("`{}` has no key `{name}`", p.display())))
        }
        Provider::Dir { allowed } => {
            if path.is_empty() {
                return Err(malformed(format!(
                    "the directory provider `{alias}` needs a path; write ${{{alias}:/path/to/dir:{name}}}"
                )));
            }
            // The key names a file in the directory, not a way out of it.
            if name.contains('/') || name == ".." || name == "." {
                return Err(malformed(format!("`{name}` is not a file name in `{path}`")));
            }
            let file = permitted(allowed, &Path::new(path).join(name))
                .ok_or_else(|| no_value(format!("`{path}` is outside the provider's allowed.paths")))?;
            // As Kafka's DirectoryConfigProvider: the file's content as it is (no trimming).
            std::fs::read_to_string(&file).map_err(|e| no_value(format!("cannot read `{}`: {e}", file.display())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(pairs: &[(&str, &str)]) -> RawConfig {
        RawConfig { entries: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), source_name: None }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pgoutbox-providers-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    const FILE_CLASS: &str = "org.apache.kafka.common.config.provider.FileConfigProvider";
    const ENV_CLASS: &str = "org.apache.kafka.common.config.provider.EnvVarConfigProvider";
    const DIR_CLASS: &str = "org.apache.kafka.common.config.provider.DirectoryConfigProvider";

    #[test]
    fn file_env_and_dir_references_resolve_in_any_value() {
        let d = temp_dir("resolve");
        let props = d.join("db.properties");
        std::fs::write(&props, "password=s3cr:et\nuser = relay\n").unwrap();
        std::fs::write(d.join("token"), "tok-123\n").unwrap();
        std::env::set_var("PGOUTBOX_TEST_PROVIDER_HOST", "db.internal");
        let p = props.display().to_string();
        let r = resolve(&raw(&[
            ("config.providers", "file, env,dir"),
            ("config.providers.file.class", FILE_CLASS),
            ("config.providers.env.class", ENV_CLASS),
            ("config.providers.dir.class", DIR_CLASS),
            ("database.password", &format!("${{file:{p}:password}}")),
            ("database.user", &format!("${{file:{p}:user}}")),
            ("database.hostname", "${env:PGOUTBOX_TEST_PROVIDER_HOST}"),
            ("transforms.outbox.route.topic.replacement", "${env:PGOUTBOX_TEST_PROVIDER_HOST}.${routedByValue}"),
            ("sasl", &format!("user-${{dir:{}:token}}-end", d.display())),
        ]))
        .unwrap();
        let e = &r.raw.entries;
        assert_eq!(e["database.password"], "s3cr:et");
        assert_eq!(e["database.user"], "relay");
        assert_eq!(e["database.hostname"], "db.internal");
        assert_eq!(
            e["transforms.outbox.route.topic.replacement"], "db.internal.${routedByValue}",
            "not a reference: no colon"
        );
        assert_eq!(e["sasl"], "user-tok-123\n-end", "the directory provider keeps the content as it is");
        assert!(r.undeclared.is_empty());
    }

    #[test]
    fn unresolved_references_name_the_key_and_never_the_value() {
        let d = temp_dir("unresolved");
        let props = d.join("db.properties");
        std::fs::write(&props, "password=hunter2\n").unwrap();
        let p = props.display().to_string();
        let base = [
            ("config.providers", "file,env"),
            ("config.providers.file.class", FILE_CLASS),
            ("config.providers.env.class", ENV_CLASS),
            ("config.providers.env.param.allowlist.pattern", "DB_.*"),
        ];
        // (reference, what the operator is told, whether a REST caller is told the same)
        let cases = [
            (format!("${{file:{p}:nope}}"), "has no key `nope`", false),
            (format!("${{file:{}/missing.properties:password}}", d.display()), "cannot read", false),
            ("${env:PGOUTBOX_SURELY_UNSET_VARIABLE_42}".to_string(), "does not match", false),
            ("${env:DB_SURELY_UNSET_VARIABLE_42}".to_string(), "is not set", false),
            ("${env:/x:DB_X}".to_string(), "takes no path", true),
            ("${file:password}".to_string(), "needs a path", true),
        ];
        for (value, needle, told_to_callers) in cases {
            let mut pairs = base.to_vec();
            pairs.push(("database.password", &value));
            let e = resolve(&raw(&pairs)).unwrap_err().to_string();
            assert!(e.contains("database.password") && e.contains(needle), "{value}: {e}");
            assert!(!e.contains("hunter2"), "{e}");
            let e = resolve_for(&raw(&pairs), Audience::RestCaller).unwrap_err().to_string();
            assert!(e.contains("database.password") && e.contains(&value), "{value}: {e}");
            assert_eq!(e.contains(needle), told_to_callers, "{value}: {e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn allowed_paths_confine_the_file_providers() {
        let d = temp_dir("allowed");
        let inside = d.join("in");
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::write(inside.join("a.properties"), "k=v\n").unwrap();
        std::fs::write(d.join("b.properties"), "k=w\n").unwrap();
        let allowed = inside.display().to_string();
        let with = |value: String| {
            resolve(&raw(&[
                ("config.providers", "file"),
                ("config.providers.file.class", FILE_CLASS),
                ("config.providers.file.param.allowed.paths", &allowed),
                ("x", &value),
            ]))
        };
        assert_eq!(with(format!("${{file:{allowed}/a.properties:k}}")).unwrap().raw.entries["x"], "v");
        let e = with(format!("${{file:{allowed}/../b.properties:k}}")).unwrap_err().to_string();
        assert!(e.contains("allowed.paths"), "{e}");
    }

    /// `in/link/..` is `out` to the kernel (link points to `out/sub`) but `in` once normalised: the
    /// providers read the normalised path they checked, as Kafka's AllowedPaths, never the raw one.
    #[test]
    fn allowed_paths_read_the_checked_path_not_through_a_symlink() {
        let d = temp_dir("symlink");
        let (inside, outside) = (d.join("in"), d.join("out"));
        std::fs::create_dir_all(inside.clone()).unwrap();
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        let _ = std::fs::remove_file(inside.join("link"));
        std::os::unix::fs::symlink(outside.join("sub"), inside.join("link")).unwrap();
        std::fs::write(outside.join("db.properties"), "k=outside\n").unwrap();
        std::fs::write(outside.join("token"), "outside").unwrap();
        let allowed = inside.display().to_string();
        let with = |value: String| {
            resolve(&raw(&[
                ("config.providers", "file,dir"),
                ("config.providers.file.class", FILE_CLASS),
                ("config.providers.file.param.allowed.paths", &allowed),
                ("config.providers.dir.class", DIR_CLASS),
                ("config.providers.dir.param.allowed.paths", &allowed),
                ("x", &value),
            ]))
        };
        let escape_file = format!("${{file:{allowed}/link/../db.properties:k}}");
        let escape_dir = format!("${{dir:{allowed}/link/..:token}}");
        // Nothing at the normalised path: no value, and never the one outside.
        for value in [&escape_file, &escape_dir] {
            match with(value.clone()) {
                Ok(r) => panic!("{value} read {:?} from outside allowed.paths", r.raw.entries["x"]),
                Err(e) => assert!(!e.to_string().contains("outside\n"), "{e}"),
            }
        }
        // What is read is the normalised path, the one the check allowed.
        std::fs::write(inside.join("db.properties"), "k=inside\n").unwrap();
        std::fs::write(inside.join("token"), "inside").unwrap();
        assert_eq!(with(escape_file).unwrap().raw.entries["x"], "inside");
        assert_eq!(with(escape_dir).unwrap().raw.entries["x"], "inside");
    }

    #[test]
    fn undeclared_providers_stay_literal_and_are_reported() {
        let r = resolve(&raw(&[("database.password", "${vault:secret/db:password}")])).unwrap();
        assert_eq!(r.raw.entries["database.password"], "${vault:secret/db:password}");
        assert_eq!(r.undeclared, vec![("database.password".to_string(), "vault".to_string())]);
    }

    #[test]
    fn unknown_provider_classes_are_refused() {
        let e = resolve(&raw(&[
            ("config.providers", "aws"),
            ("config.providers.aws.class", "com.amazonaws.secretsmanager.ConfigProvider"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("config.providers.aws.class") && e.contains("FileConfigProvider"), "{e}");
        let e = resolve(&raw(&[("config.providers", "file")])).unwrap_err().to_string();
        assert!(e.contains("config.providers.file.class"), "{e}");
    }
}
