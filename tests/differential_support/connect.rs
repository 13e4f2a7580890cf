//! Apache Kafka Connect itself, as a reference: a distributed worker of the suite's Kafka release with
//! the Debezium PostgreSQL connector from Maven Central on its plugin path (`scripts/lib.sh`
//! connect_start), driven through its REST API.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::broker::scripts_dir;
use super::debezium::tail;

/// A Kafka Connect distributed worker (`scripts/lib.sh` connect_start), started again on the same
/// directory as a restart of the same worker.
pub struct Connect {
    dir: PathBuf,
    broker: String,
    extra: String,
    addr: String,
    /// `CONNECT_METRICS` for `connect-start` (the JMX exporter's `port:config`), if any.
    metrics: Option<String>,
}

impl Connect {
    pub fn start(dir: PathBuf, broker: &str, extra: &str) -> Connect {
        Connect::start_with_metrics(dir, broker, extra, None)
    }

    /// With `metrics` (`port:exporter-config`), the JMX exporter serves the worker's MBeans.
    pub fn start_with_metrics(dir: PathBuf, broker: &str, extra: &str, metrics: Option<String>) -> Connect {
        let mut c = Connect { dir, broker: broker.to_string(), extra: extra.to_string(), addr: String::new(), metrics };
        c.restart();
        c
    }

    pub fn restart(&mut self) {
        let mut command = Command::new("bash");
        if let Some(m) = &self.metrics {
            command.env("CONNECT_METRICS", m);
        }
        let out = command
            .arg(scripts_dir().join("services.sh"))
            .args(["connect-start", &self.dir.to_string_lossy(), &self.broker, &self.extra])
            .output()
            .expect("run services.sh connect-start");
        assert!(out.status.success(), "Kafka Connect did not start: {}", String::from_utf8_lossy(&out.stderr));
        let env = std::fs::read_to_string(self.dir.join("env")).expect("Connect's env file");
        self.addr = env.trim().strip_prefix("REST=").expect("REST= line").to_string();
    }

    /// The worker's group: its transactional ids are `<group>-<connector>-<task>`.
    pub fn group(&self) -> String {
        format!("ref-connect-{}", self.dir.file_name().unwrap().to_string_lossy())
    }

    pub fn kill9(&self) {
        let pid = std::fs::read_to_string(self.dir.join("pid")).expect("Connect's pid file");
        let pid = pid.trim();
        let _ = Command::new("kill").args(["-9", pid]).status();
        let start = Instant::now();
        while Command::new("kill").args(["-0", pid]).status().is_ok_and(|s| s.success()) {
            assert!(start.elapsed() < Duration::from_secs(20), "Connect (pid {pid}) survived SIGKILL");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn stop(&self) {
        let _ = Command::new("bash")
            .arg(scripts_dir().join("services.sh"))
            .args(["connect-stop", &self.dir.to_string_lossy()])
            .output();
    }

    /// `method path` with a JSON body; the status and the body.
    pub fn call(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(&self.addr) else { return (0, String::new()) };
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let req = format!(
            "{method} {path} HTTP/1.0\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        if s.write_all(req.as_bytes()).is_err() {
            return (0, String::new());
        }
        let mut raw = String::new();
        let _ = s.read_to_string(&mut raw);
        let code = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (code, raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
    }

    /// Creates connector `name` from its keys (worker keys among them are left to the worker, as the
    /// properties file for pgoutbox carries them); an error says what Connect answered.
    pub fn create(&self, name: &str, keys: &BTreeMap<String, String>) -> Result<(), String> {
        let config: serde_json::Map<String, serde_json::Value> = keys
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "bootstrap.servers" | "offset.flush.interval.ms"))
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        let body = serde_json::json!({ "name": name, "config": config }).to_string();
        match self.call("POST", "/connectors", &body) {
            (201, _) => Ok(()),
            (code, answer) => Err(format!("creating the connector in Connect: {code} {answer}\n{}", self.log_tail(40))),
        }
    }

    /// Connector `name`'s state and its tasks', as `CONNECTOR/TASK,TASK` (`?` when unknown).
    pub fn state(&self, name: &str) -> String {
        let (_, body) = self.call("GET", &format!("/connectors/{name}/status"), "");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let tasks: Vec<String> =
            v["tasks"].as_array().into_iter().flatten().filter_map(|t| t["state"].as_str().map(String::from)).collect();
        format!("{}/{}", v["connector"]["state"].as_str().unwrap_or("?"), tasks.join(","))
    }

    /// Stops connector `name` and waits (up to a minute) until Connect reports it STOPPED.
    pub fn stop_connector(&self, name: &str) -> Result<(), String> {
        self.call("PUT", &format!("/connectors/{name}/stop"), "");
        let start = Instant::now();
        while !self.state(name).starts_with("STOPPED") {
            if start.elapsed() > Duration::from_secs(60) {
                return Err(format!("the connector did not stop: {}", self.state(name)));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("stdout.log")).unwrap_or_default();
        tail(&text, n)
    }
}

impl Drop for Connect {
    fn drop(&mut self) {
        self.stop();
    }
}
