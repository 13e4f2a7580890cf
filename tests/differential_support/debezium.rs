//! The real Debezium 3.6.3 (`scripts/debezium.sh run`, which exec's the JVM, so the child's pid is the
//! JVM's and SIGTERM is its clean stop). Its stdout protocol is read on a thread:
//! `DEBEZIUM STREAMING`, `DEBEZIUM RECORDS n` (every acknowledged record with `--progress 1`) and
//! `DEBEZIUM STOPPED records=n`. Its log goes to a file whose tail failure reports include.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::broker::scripts_dir;

/// How often waits look at the process; waits themselves are bounded by their deadline.
const POLL: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Progress {
    records: AtomicU64,
    streaming: AtomicBool,
}

pub struct Debezium {
    child: Option<Child>,
    progress: Arc<Progress>,
    pub log: PathBuf,
    pub exit: Option<ExitStatus>,
}

/// Fetches and compiles the runner once per test process (idempotent and cached across runs).
fn install() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let out = Command::new(scripts_dir().join("debezium.sh"))
            .arg("install")
            .output()
            .expect("run scripts/debezium.sh install");
        assert!(out.status.success(), "scripts/debezium.sh install failed:\n{}", String::from_utf8_lossy(&out.stderr));
    });
}

impl Debezium {
    pub fn start(config: &Path, log: &Path) -> Debezium {
        tokio::task::block_in_place(install);
        let log_file = File::create(log).expect("create Debezium log");
        let mut child = Command::new(scripts_dir().join("debezium.sh"))
            .args(["run", "--progress", "1", "--config"])
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .expect("spawn scripts/debezium.sh run");
        let progress = Arc::new(Progress::default());
        let stdout = child.stdout.take().expect("piped stdout");
        let p = progress.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(n) = line.strip_prefix("DEBEZIUM RECORDS ").and_then(|n| n.trim().parse().ok()) {
                    p.records.fetch_max(n, Ordering::SeqCst);
                } else if line.starts_with("DEBEZIUM STREAMING") {
                    p.streaming.store(true, Ordering::SeqCst);
                }
            }
        });
        Debezium { child: Some(child), progress, log: log.to_path_buf(), exit: None }
    }

    /// Records the broker acknowledged so far.
    pub fn records(&self) -> u64 {
        self.progress.records.load(Ordering::SeqCst)
    }

    pub fn streaming(&self) -> bool {
        self.progress.streaming.load(Ordering::SeqCst)
    }

    fn poll_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            if let Some(s) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.exit = Some(s);
                self.child = None;
            }
        }
        self.exit
    }

    /// Waits until at least `n` records are acknowledged; fails if Debezium exits first or the deadline passes.
    pub async fn wait_records(&mut self, n: u64, deadline: Duration) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if self.records() >= n {
                return Ok(());
            }
            if let Some(s) = self.poll_exit() {
                return Err(format!("Debezium exited ({s}) after {} of {n} records", self.records()));
            }
            if start.elapsed() > deadline {
                return Err(format!("Debezium produced {} of {n} records within {deadline:?}", self.records()));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits for Debezium to exit on its own (e.g. after a failure), bounded.
    pub async fn wait_exit(&mut self, deadline: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < deadline {
            if let Some(s) = self.poll_exit() {
                return Some(s);
            }
            tokio::time::sleep(POLL).await;
        }
        None
    }

    /// Waits for Debezium to fail: it exits, or its log reports the engine failed (the JVM can take
    /// minutes to exit after that, so it is then stopped). None if neither happens in time.
    pub async fn wait_failure(&mut self, deadline: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < deadline {
            if let Some(s) = self.poll_exit() {
                return Some(s);
            }
            if std::fs::read_to_string(&self.log).unwrap_or_default().contains("pgoutbox-debezium: engine failed") {
                // The status is then that of the kill; the log line is the failure.
                self.kill();
                return self.exit;
            }
            tokio::time::sleep(POLL).await;
        }
        None
    }

    /// SIGTERM (engine.close(), offsets flushed) and wait for the exit; SIGKILL after 60 s.
    pub async fn stop(&mut self) -> Result<ExitStatus, String> {
        if let Some(s) = self.poll_exit() {
            return Ok(s);
        }
        let pid = self.child.as_ref().map(Child::id).expect("running");
        let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
        match self.wait_exit(Duration::from_secs(60)).await {
            Some(s) => Ok(s),
            None => {
                self.kill();
                Err("Debezium did not stop within 60 s of SIGTERM".to_string())
            }
        }
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            self.exit = c.wait().ok();
        }
    }

    /// The last `n` lines of Debezium's log, for failure reports.
    pub fn log_tail(&self, n: usize) -> String {
        tail(&std::fs::read_to_string(&self.log).unwrap_or_default(), n)
    }
}

impl Drop for Debezium {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
