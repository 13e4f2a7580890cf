//! A throwaway tansu broker per relay and configuration, so that each side's topics hold exactly what
//! that side produced. Started the way `scripts/lib.sh` `broker_start` does (same binary, listener and
//! advertised URL on loopback, in-memory storage), but as a child of the test so that it dies with it.

use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};

/// The repository's `scripts/` directory (scripts/test.sh exports it; otherwise next to Cargo.toml).
pub fn scripts_dir() -> PathBuf {
    std::env::var_os("PGOUTBOX_TEST_SCRIPTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts"))
}

/// The tansu binary `scripts/lib.sh` uses (`broker_bin memory`), asked from lib.sh itself so the cache
/// location and version are defined in one place.
fn tansu_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = Command::new("bash")
            .arg("-c")
            .arg(r#". "$1/lib.sh" && printf %s "$(broker_bin memory)""#)
            .arg("lib")
            .arg(scripts_dir())
            .output()
            .expect("run bash to read TANSU_BIN from scripts/lib.sh");
        let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).into_owned());
        assert!(bin.is_file(), "tansu binary {} missing: run scripts/install.sh", bin.display());
        bin
    })
}

pub struct Broker {
    child: Child,
    /// `127.0.0.1:port`, for bootstrap.servers.
    pub addr: String,
}

impl Broker {
    /// Starts a broker whose log is `dir/broker.log`; panics if it does not listen within 10 s.
    pub fn start(dir: &Path) -> Broker {
        std::fs::create_dir_all(dir).expect("create broker dir");
        // A port freed by the OS can be taken by someone else before tansu binds it: retry.
        for _ in 0..3 {
            let port = free_port();
            let url = format!("tcp://127.0.0.1:{port}");
            let log = File::options().create(true).append(true).open(dir.join("broker.log")).expect("broker log");
            let mut child = Command::new(tansu_bin())
                .current_dir(dir)
                .args([
                    "broker",
                    "--listener-url",
                    &url,
                    "--advertised-listener-url",
                    &url,
                    "--storage-engine",
                    "memory://tansu/",
                ])
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("clone log handle"))
                .stderr(log)
                .spawn()
                .expect("spawn tansu");
            if listening(&mut child, port, Duration::from_secs(10)) {
                return Broker { child, addr: format!("127.0.0.1:{port}") };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("tansu did not start; see {}", dir.join("broker.log").display());
    }
}

/// pgoutbox's record of its slot (`offset.storage.topic`): internal, like Connect's offsets topic on
/// Debezium's side (which the embedded engine keeps in a file), not a record of the Event Router.
const OFFSETS_TOPIC: &str = pgoutbox::kafka::offsets::DEFAULT_TOPIC;

/// Every topic on the broker except internal ones (`__…` and pgoutbox's offsets topic), so that
/// records sent to a topic nobody expected are compared too.
pub fn list_topics(addr: &str) -> Vec<String> {
    let c: BaseConsumer =
        rdkafka::ClientConfig::new().set("bootstrap.servers", addr).create().expect("metadata client");
    let md = c.fetch_metadata(None, Duration::from_secs(10)).expect("broker metadata");
    let mut names: Vec<String> = md
        .topics()
        .iter()
        .map(|t| t.name().to_string())
        .filter(|n| !n.starts_with("__") && n != OFFSETS_TOPIC)
        .collect();
    names.sort();
    names
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("bind a free port")
}

fn listening(child: &mut Child, port: u16, deadline: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return false;
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
