//! Throwaway PostgreSQL and brokers for the benchmark, through scripts/services.sh.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Services {
    pub root: PathBuf,
    pub scripts: PathBuf,
    pub pg_port: u16,
    /// (bootstrap address, directory) of each running broker.
    brokers: Vec<(String, PathBuf)>,
    /// Directories of the Kafka clusters started.
    kafkas: Vec<(String, PathBuf)>,
    /// The converter lines every relay's config gets (JsonConverter unless `--avro` or `--protobuf`).
    pub converters: String,
    /// The schema registry's directory, when one runs.
    registry: Option<PathBuf>,
}

/// Connect's JsonConverter for keys and values, as the Debezium image configures its worker.
const JSON_CONVERTERS: &str =
    "key.converter=org.apache.kafka.connect.json.JsonConverter\nvalue.converter=org.apache.kafka.connect.json.JsonConverter\n";

fn sh(scripts: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("bash").arg(scripts.join("services.sh")).args(args).output()?;
    if !out.status.success() {
        anyhow::bail!("services.sh {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl Services {
    pub fn start(scripts: PathBuf) -> anyhow::Result<Services> {
        let root = std::env::temp_dir().join(format!("pgoutbox-bench-{}", std::process::id()));
        std::fs::create_dir_all(&root)?;
        Command::new("chmod").arg("755").arg(&root).status()?;
        let pg_port: u16 = sh(&scripts, &["free-port"])?.parse()?;
        sh(&scripts, &["pg-start", &root.join("pg").to_string_lossy(), &pg_port.to_string()])?;
        Ok(Services {
            root,
            scripts,
            pg_port,
            brokers: Vec::new(),
            kafkas: Vec::new(),
            converters: JSON_CONVERTERS.to_string(),
            registry: None,
        })
    }

    /// Starts a schema registry (scripts/registry.sh) and switches every relay to Confluent's
    /// `converter` (its AvroConverter or ProtobufConverter) for keys and values, through the
    /// registry's Confluent-compatible API.
    pub fn registry_converter(&mut self, converter: &str) -> anyhow::Result<()> {
        let dir = self.root.join("registry");
        let status = Command::new("bash").arg(self.scripts.join("registry.sh")).arg("start").arg(&dir).status()?;
        anyhow::ensure!(status.success(), "scripts/registry.sh start failed");
        self.registry = Some(dir.clone());
        let env = std::fs::read_to_string(dir.join("env"))?;
        let url = env
            .lines()
            .find_map(|l| l.strip_prefix("URL="))
            .ok_or_else(|| anyhow::anyhow!("no URL= in {}", dir.display()))?;
        self.converters = ["key", "value"]
            .iter()
            .map(|p| format!("{p}.converter={converter}\n{p}.converter.schema.registry.url={url}/apis/ccompat/v7\n"))
            .collect();
        Ok(())
    }

    /// A fresh in-memory broker; returns its bootstrap address.
    pub fn broker(&mut self, name: &str) -> anyhow::Result<String> {
        let port = sh(&self.scripts, &["free-port"])?;
        let dir = self.root.join(format!("broker-{name}"));
        sh(&self.scripts, &["broker-start", &dir.to_string_lossy(), &port])?;
        let bootstrap = format!("127.0.0.1:{port}");
        self.brokers.push((bootstrap.clone(), dir));
        Ok(bootstrap)
    }

    /// Apache Kafka (KRaft) with `nodes` brokers on loopback; returns its bootstrap address.
    pub fn kafka(&mut self, name: &str, nodes: usize) -> anyhow::Result<String> {
        let dir = self.root.join(format!("kafka-{name}"));
        sh(&self.scripts, &["kafka-start", &dir.to_string_lossy(), &nodes.to_string()])?;
        let env = std::fs::read_to_string(dir.join("env"))?;
        let bootstrap = env
            .lines()
            .find_map(|l| l.strip_prefix("PLAINTEXT="))
            .ok_or_else(|| anyhow::anyhow!("no PLAINTEXT listener in {}", dir.join("env").display()))?
            .to_string();
        self.kafkas.push((bootstrap.clone(), dir));
        Ok(bootstrap)
    }

    pub fn stop_broker(&mut self, bootstrap: &str) {
        if let Some(i) = self.brokers.iter().position(|(b, _)| b == bootstrap) {
            let (_, dir) = self.brokers.remove(i);
            let _ = sh(&self.scripts, &["broker-stop", &dir.to_string_lossy()]);
        }
        if let Some(i) = self.kafkas.iter().position(|(b, _)| b == bootstrap) {
            let (_, dir) = self.kafkas.remove(i);
            let _ = sh(&self.scripts, &["kafka-stop", &dir.to_string_lossy(), "kill"]);
        }
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        for (_, d) in &self.brokers {
            let _ = sh(&self.scripts, &["broker-stop", &d.to_string_lossy()]);
        }
        for (_, d) in &self.kafkas {
            let _ = sh(&self.scripts, &["kafka-stop", &d.to_string_lossy(), "kill"]);
        }
        if let Some(dir) = &self.registry {
            let _ = Command::new("bash").arg(self.scripts.join("registry.sh")).arg("stop").arg(dir).status();
        }
        let _ = sh(&self.scripts, &["pg-stop", &self.root.join("pg").to_string_lossy(), "immediate"]);
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
