//! The container files, tested without a container engine (none runs on the CI machines): the
//! Dockerfile's shape and its build command (the one CI runs), the compose file parsed, and the
//! config the compose file runs, read the way the container reads it (mounted file, environment
//! overrides, file config provider). What cannot be tested here: building the image and
//! `docker compose up`.

use std::path::{Path, PathBuf};

use pgoutbox::config::{env, parse_properties, Config};
use yaml_rust2::{Yaml, YamlLoader};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn compose() -> Yaml {
    YamlLoader::load_from_str(&read("docker/compose.yaml")).expect("docker/compose.yaml is YAML").remove(0)
}

fn strings(y: &Yaml) -> Vec<String> {
    y.as_vec().map(|v| v.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// The exec-form CMD or ENTRYPOINT of the Dockerfile's last stage, as a list.
fn exec_form(dockerfile: &str, instruction: &str) -> Vec<String> {
    let line = dockerfile
        .lines()
        .rfind(|l| l.starts_with(&format!("{instruction} ")))
        .unwrap_or_else(|| panic!("no {instruction}"));
    let json = line[instruction.len()..].trim();
    json.trim_matches(|c| c == '[' || c == ']').split(',').map(|s| s.trim().trim_matches('"').to_string()).collect()
}

#[test]
fn dockerfile_builds_with_the_ci_command_and_runs_non_root() {
    let d = read("docker/Dockerfile");
    let stages: Vec<&str> = d.lines().filter(|l| l.starts_with("FROM ")).collect();
    // The build, the runtime's files taken from Debian's slim image, and the runtime on scratch.
    assert_eq!(stages.len(), 3, "build, runtime files, runtime: {stages:?}");
    assert!(stages[0].contains(" AS build"), "{stages:?}");
    assert!(stages[1].contains("slim") && stages[1].contains(" AS runtime-files"), "{stages:?}");
    assert_eq!(stages[2], "FROM scratch", "{stages:?}");
    assert!(d.contains("RUN bash scripts/build-release.sh"), "the image builds with the demo's build command");
    let image = read("scripts/image.sh");
    assert!(image.contains("-f \"$root/docker/Dockerfile\""), "scripts/image.sh builds this Dockerfile");
    let user = d.lines().rfind(|l| l.starts_with("USER ")).expect("a USER");
    assert!(!user.contains("root") && !user.trim_end().ends_with(" 0"), "{user}");
    assert_eq!(exec_form(&d, "ENTRYPOINT"), ["pgoutbox"]);
    // The Connect worker by default, as Debezium's image; `run` one argument away, its file, metrics
    // address and environment overrides coming from the image's environment.
    assert_eq!(exec_form(&d, "CMD"), ["connect"]);
    for env in [
        "ENV PGOUTBOX_WORKER=/etc/pgoutbox/worker.properties",
        "ENV PGOUTBOX_ENV_OVERRIDES=true",
        "ENV PGOUTBOX_CONFIG=/etc/pgoutbox/connector.properties",
        "ENV PGOUTBOX_METRICS_ADDRESS=0.0.0.0:8080",
    ] {
        assert!(d.lines().any(|l| l == env), "the image sets {env}");
    }
    assert!(d.lines().any(|l| l.starts_with("EXPOSE 8083")), "the worker's port first");
    let health = exec_form(&d, "HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD");
    assert_eq!(health, ["/usr/local/bin/pgoutbox-healthcheck"]);
    assert!(d.contains("COPY docker/healthcheck.sh /usr/local/bin/pgoutbox-healthcheck"));
    let label = format!("org.opencontainers.image.version=\"{}\"", env!("CARGO_PKG_VERSION"));
    assert!(d.contains(&label), "the image's version label is the crate's: {label}");
    for l in ["title", "revision", "licenses", "description"] {
        assert!(d.contains(&format!("org.opencontainers.image.{l}=")), "OCI label {l}");
    }
    // Every path the Dockerfile copies exists in the repository.
    for l in d.lines().filter(|l| l.starts_with("COPY ") && !l.contains("--from")) {
        let parts: Vec<&str> = l.split_whitespace().collect();
        for src in &parts[1..parts.len() - 1] {
            assert!(repo(src).exists(), "COPY source {src} is missing");
        }
    }
}

#[test]
fn compose_runs_the_outbox_quickstart_with_logical_postgres_and_kraft_kafka() {
    let c = compose();
    let s = &c["services"];
    let postgres = &s["postgres"];
    assert!(strings(&postgres["command"]).iter().any(|a| a == "wal_level=logical"), "{postgres:?}");
    let kafka = &s["kafka"];
    assert!(kafka["image"].as_str().unwrap().starts_with("apache/kafka:"));
    assert!(kafka["environment"]["KAFKA_PROCESS_ROLES"].as_str().unwrap().contains("controller"), "KRaft mode");
    let relay = &s["pgoutbox"];
    assert_eq!(relay["build"]["dockerfile"].as_str(), Some("docker/Dockerfile"));
    assert!(repo("docker").join(relay["build"]["context"].as_str().unwrap()).join("docker/Dockerfile").exists());
    assert_eq!(strings(&relay["command"]), ["run"], "the relay without Connect: one argument");
    let d = read("docker/Dockerfile");
    let config_path = d.lines().find_map(|l| l.strip_prefix("ENV PGOUTBOX_CONFIG=")).expect("run's config path");
    let volumes = strings(&relay["volumes"]);
    assert!(
        volumes.iter().any(|v| v.contains(&format!(":{config_path}"))),
        "the config is mounted at {config_path}: {volumes:?}"
    );
    for v in &volumes {
        let host = v.split(':').next().unwrap();
        assert!(repo("docker").join(host).exists(), "mounted file {host} exists");
    }
    assert!(s["consumer"]["command"][0].as_str().unwrap().contains("order.events"));
}

/// The compose file's pgoutbox, configured as the container would be: the mounted connector file,
/// its environment mapped onto keys, the secret read through the file config provider.
#[test]
fn compose_config_is_read_as_the_container_reads_it() {
    let c = compose();
    let relay = &c["services"]["pgoutbox"];
    let secrets_dir = repo("docker");
    let mut raw =
        parse_properties(&read("docker/connector.properties").replace("/run/secrets", &secrets_dir.to_string_lossy()));
    let vars: Vec<(String, String)> = relay["environment"]
        .as_hash()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (k.as_str().unwrap().to_string(), v.as_str().map(str::to_string).unwrap_or_else(|| format!("{v:?}")))
        })
        .collect();
    for (k, v) in env::overrides(vars).unwrap() {
        raw.entries.insert(k, v);
    }
    let cfg = Config::from_raw(&raw).expect("the compose config is valid");
    assert_eq!(cfg.database.hostname, "postgres");
    assert_eq!(cfg.kafka.bootstrap_servers, "kafka:9092");
    assert_eq!(cfg.database.password.as_ref().map(|p| p.expose()), Some("postgrespw"), "from the file provider");
    assert!(cfg.undeclared_providers.is_empty());
    let postgres_env = &c["services"]["postgres"]["environment"];
    assert_eq!(postgres_env["POSTGRES_DB"].as_str(), Some(cfg.database.dbname.as_str()));
    assert_eq!(postgres_env["POSTGRES_USER"].as_str(), Some(cfg.database.user.as_str()));
    assert!(read("docker/init.sql").contains("inventory.outboxevent"));
}

/// The container's way of running: keys from the environment (`--env-overrides`) and JSON logs.
/// A bad value given through the environment is reported as a JSON line naming the key.
#[test]
fn env_overrides_and_json_logs_work_from_the_command_line() {
    let dir = std::env::temp_dir().join(format!("pgoutbox-container-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("connector.properties");
    std::fs::write(&cfg, read("examples/connector.properties")).unwrap();
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pgoutbox"))
            .args(args)
            .arg("--config")
            .arg(&cfg)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, stderr, _) =
        run(&[("PGOUTBOX_DATABASE_PORT", "notaport")], &["--log-format", "json", "run", "--env-overrides"]);
    assert_eq!(code, Some(2), "{stderr}");
    let line = stderr.lines().find(|l| l.contains("database.port")).unwrap_or_else(|| panic!("{stderr}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    assert_eq!(v["level"], "ERROR");
    // The key is named, the value is not repeated (it could be a secret).
    assert!(!v["message"].as_str().unwrap().contains("notaport"), "{v}");
    // Without --env-overrides the environment is not read.
    let (code, _, stdout) = run(&[("PGOUTBOX_DATABASE_PORT", "notaport"), ("PGOUTBOX_LOG_FORMAT", "json")], &["check"]);
    assert!(!stdout.contains("notaport"), "{stdout}");
    assert_ne!(code, Some(2), "{stdout}");
}

/// The image's Connect worker and the quickstart's `connect` service ship locked down: basic auth
/// on (the JAAS file KAFKA_OPTS names, the users file compose mounts) and connectors unable to
/// redirect the worker's Kafka clients (policy None). Read with the code the worker runs.
#[test]
fn image_and_quickstart_worker_ship_with_auth_and_a_restrictive_override_policy() {
    use pgoutbox::worker::{auth::BasicAuth, policy::OverridePolicy};
    let d = read("docker/Dockerfile");
    let kafka_opts = d
        .lines()
        .find_map(|l| l.strip_prefix("ENV KAFKA_OPTS="))
        .expect("the image sets KAFKA_OPTS to the JAAS file, as Connect's scripts do");
    for copied in ["docker/worker.properties", "docker/connect_jaas.conf"] {
        assert!(d.contains(&format!("COPY {copied} ")), "the image ships {copied}");
    }
    let worker = parse_properties(&read("docker/worker.properties")).entries;
    assert_eq!(OverridePolicy::from_props(&worker).unwrap(), OverridePolicy::None);
    // The paths as the container has them, mapped onto the repository's files.
    let dir = std::env::temp_dir().join(format!("pgoutbox-image-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let jaas = read("docker/connect_jaas.conf")
        .replace("/run/secrets/connect-users.properties", &repo("docker/connect-users.properties").to_string_lossy());
    std::fs::write(dir.join("connect_jaas.conf"), jaas).unwrap();
    let opts = kafka_opts.replace("/etc/pgoutbox/connect_jaas.conf", &dir.join("connect_jaas.conf").to_string_lossy());
    let auth = BasicAuth::from_props(&worker, Some(&opts)).unwrap().expect("basic auth is on");
    use base64::Engine;
    let basic = |up: &str| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(up));
    assert!(auth.allows(Some(&basic("admin:admin-secret"))));
    assert!(!auth.allows(None));
    let services = &compose()["services"];
    let connect = &services["connect"];
    assert!(connect["command"].is_badvalue(), "the quickstart's worker runs the image's default command");
    let volumes = strings(&connect["volumes"]);
    assert!(volumes.iter().any(|v| v.ends_with(":/run/secrets/connect-users.properties:ro")), "{volumes:?}");
    for v in &volumes {
        assert!(repo("docker").join(v.split(':').next().unwrap()).exists(), "mounted file {v} exists");
    }
    // The worker as the container configures it: the image's file, then Debezium's image variables.
    let mut props = worker.clone();
    let vars: Vec<(String, String)> = connect["environment"]
        .as_hash()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str().unwrap().to_string(), v.as_str().unwrap().to_string()))
        .collect();
    for (k, v) in env::worker_overrides(vars).unwrap() {
        props.insert(k, v);
    }
    let settings = pgoutbox::worker::cluster::Settings::from_props(&props).unwrap().expect("distributed mode");
    assert_eq!((settings.group_id.as_str(), settings.config_topic.as_str()), ("1", "my_connect_configs"));
    // `register` PUTs the connector the worker validates as it would a REST call.
    let register = strings(&services["register"]["command"]);
    assert!(register.last().unwrap().ends_with("/connectors/outbox-connector/config"), "{register:?}");
    assert!(register.iter().any(|a| a == "@/outbox-connector.json") && register.contains(&"PUT".to_string()));
    let secrets = repo("docker").to_string_lossy().into_owned();
    props.insert("config.providers.file.param.allowed.paths".into(), secrets.clone());
    let w = pgoutbox::worker::Worker::new(props, "w:8083".into(), Default::default(), None).unwrap();
    let json = read("docker/outbox-connector.json").replace("/run/secrets", &secrets);
    let config: std::collections::BTreeMap<String, String> = serde_json::from_str(&json).unwrap();
    let mut config = config;
    config.insert("name".into(), "outbox-connector".into());
    let cfg = w.effective(&config).unwrap_or_else(|e| panic!("the quickstart's connector is valid: {e}"));
    assert_eq!(cfg.database.password.as_ref().map(|p| p.expose()), Some("postgrespw"), "through the worker's provider");
    let _ = std::fs::remove_dir_all(dir);
}

/// `pgoutbox --version` names what an operator reports a problem against: the version, the commit
/// (build.rs; the image passes it as a build argument), librdkafka's version and the Connect REST API
/// version it implements.
#[test]
fn version_names_the_commit_librdkafka_and_the_connect_api() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pgoutbox")).arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let expected = format!("pgoutbox {} (commit {}, librdkafka ", env!("CARGO_PKG_VERSION"), pgoutbox::COMMIT);
    assert!(text.starts_with(&expected), "{text}");
    assert!(text.contains("Kafka Connect REST API 4."), "{text}");
    assert!(pgoutbox::COMMIT != "unknown", "built from a git checkout, the commit is known");
    let d = read("docker/Dockerfile");
    assert!(d.contains("ARG PGOUTBOX_COMMIT"), "the image build takes the commit as an argument");
}
