//! Secrets stay secret: the database password given in a config never appears in the relay's logs
//! (at every level, through connection failures, authentication failures and a bad config), in its
//! error messages, or in `--help`. Runs the real binary against the fault suite's bed.

mod faults_support;
mod support;

use std::time::Duration;

use faults_support::bed::Bed;
use faults_support::procs::{free_port, run_to_end};
use faults_support::scenario::bounded;
use support::Env;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn secrets_never_appear_in_logs_errors_or_help() {
    let name = "secrets_never_appear_in_logs_errors_or_help";
    bounded(name, Duration::from_secs(180), async {
        const SECRET: &str = "Sekr3t-pgoutbox-ZX81";
        let env = Env::get();
        let bed = Bed::shared("secret").await;
        let dir = std::env::temp_dir().join(support::unique("secret_cfg"));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |file: &str, text: String| {
            let p = dir.join(file);
            std::fs::write(&p, text).unwrap();
            p.to_string_lossy().into_owned()
        };
        let dead = free_port();
        let with_password = |cfg: String, user: &str| {
            cfg.replace("database.user=postgres", &format!("database.user={user}\ndatabase.password={SECRET}"))
        };
        let cases: Vec<(&str, Vec<String>, &str, Option<Duration>)> = vec![
            // Nobody listens: connection errors, retried and logged, until SIGTERM.
            (
                "unreachable postgres and broker",
                vec![
                    "run".into(),
                    "--config".into(),
                    write(
                        "unreachable.properties",
                        with_password(bed.config_via(dead, &format!("127.0.0.1:{dead}"), &[]), "postgres"),
                    ),
                ],
                "trace",
                Some(Duration::from_secs(4)),
            ),
            (
                "unknown host",
                vec![
                    "run".into(),
                    "--config".into(),
                    write(
                        "nohost.properties",
                        with_password(
                            bed.config(&[])
                                .replace("database.hostname=127.0.0.1", "database.hostname=db.pgoutbox-faults.invalid"),
                            "postgres",
                        ),
                    ),
                ],
                "debug",
                Some(Duration::from_secs(4)),
            ),
            // A wrong password: PostgreSQL refuses, the relay exits 3.
            (
                "wrong password",
                vec![
                    "run".into(),
                    "--config".into(),
                    write("badpw.properties", with_password(bed.config(&[]), "scram_user")),
                ],
                "trace",
                None,
            ),
            // Right database (trust: the password is unused), broker unreachable: librdkafka errors.
            (
                "unreachable broker",
                vec![
                    "run".into(),
                    "--config".into(),
                    write("nobroker.properties", bed.config_via(env.pg_port, &format!("127.0.0.1:{dead}"), &[])),
                    "--set".into(),
                    format!("database.password={SECRET}"),
                ],
                "trace",
                Some(Duration::from_secs(5)),
            ),
            // Kafka secrets (a JAAS password, a store password) with librdkafka's every debug
            // context on (it dumps its configuration), broker unreachable.
            (
                "kafka secrets, unreachable broker",
                vec![
                    "run".into(),
                    "--config".into(),
                    write(
                        "kafka_secrets.properties",
                        bed.config_via(
                            env.pg_port,
                            &format!("127.0.0.1:{dead}"),
                            &[
                                "producer.override.security.protocol=SASL_SSL",
                                "producer.override.sasl.mechanism=SCRAM-SHA-512",
                                &format!("producer.override.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"{SECRET}\";"),
                                &format!("producer.override.ssl.keystore.password={SECRET}"),
                                &format!("producer.override.ssl.key.password={SECRET}"),
                                "producer.override.debug=all",
                            ],
                        ),
                    ),
                ],
                "trace",
                Some(Duration::from_secs(5)),
            ),
            // A config error elsewhere in a file that holds the password.
            (
                "config error",
                vec![
                    "run".into(),
                    "--config".into(),
                    write(
                        "badcfg.properties",
                        with_password(
                            bed.config(&["database.port=not-a-port", "status.update.interval.ms=soon"]),
                            "postgres",
                        ),
                    ),
                ],
                "trace",
                None,
            ),
            // A typo in a --set of the password (no `=`): the error must not echo the value.
            (
                "bad --set",
                vec![
                    "run".into(),
                    "--config".into(),
                    write("ok.properties", bed.config(&[])),
                    "--set".into(),
                    format!("database.password{SECRET}"),
                ],
                "trace",
                None,
            ),
            // The other commands that read the same config.
            (
                "check: unreachable",
                vec![
                    "check".into(),
                    "--config".into(),
                    dir.join("unreachable.properties").to_string_lossy().into_owned(),
                ],
                "trace",
                Some(Duration::from_secs(20)),
            ),
            (
                "check: wrong password",
                vec!["check".into(), "--config".into(), dir.join("badpw.properties").to_string_lossy().into_owned()],
                "trace",
                Some(Duration::from_secs(20)),
            ),
            (
                "verify: unreachable",
                vec![
                    "verify".into(),
                    "--config".into(),
                    dir.join("unreachable.properties").to_string_lossy().into_owned(),
                ],
                "trace",
                Some(Duration::from_secs(20)),
            ),
            (
                "verify: wrong password",
                vec!["verify".into(), "--config".into(), dir.join("badpw.properties").to_string_lossy().into_owned()],
                "trace",
                Some(Duration::from_secs(20)),
            ),
            ("--help", vec!["--help".into()], "info", None),
            ("run --help", vec!["run".into(), "--help".into()], "info", None),
            (
                "run --help with a password",
                vec![
                    "run".into(),
                    "--config".into(),
                    "x".into(),
                    "--set".into(),
                    format!("database.password={SECRET}"),
                    "--help".into(),
                ],
                "info",
                None,
            ),
        ];
        let mut summary = Vec::new();
        let mut leaks = Vec::new();
        for (what, args, level, stop_after) in cases {
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, text) = tokio::task::block_in_place(|| run_to_end(&argv, level, stop_after));
            assert!(!text.is_empty(), "{what}: no output at all");
            if text.contains(SECRET) {
                leaks.push(format!(
                    "{what}:\n{}",
                    text.lines().filter(|l| l.contains(SECRET)).take(5).collect::<Vec<_>>().join("\n")
                ));
            }
            summary.push(format!("{what}: exit {code:?}, {} lines", text.lines().count()));
        }
        let _ = std::fs::remove_dir_all(&dir);
        bed.drop_slot().await;
        println!("{name}: cases [{}] leaks={}", summary.join("; "), leaks.len());
        assert!(leaks.is_empty(), "the secret appears in the output of:\n{}", leaks.join("\n"));
    })
    .await;
}
