//! A schema registry of a scenario's own (`scripts/registry.sh`, Apicurio Registry), to stop and
//! resume it, and what the registry tests read from it.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::support::{unique, Outbox};

/// A registry of the test's own: `scripts/registry.sh start DIR`.
pub struct Registry {
    dir: PathBuf,
    pub url: String,
    /// The CA's PEM file of a registry started with TLS.
    pub ca: Option<String>,
}

impl Registry {
    pub fn start(name: &str) -> Registry {
        Self::start_with(name, &[])
    }

    /// Over https only, with a CA of its own (`scripts/registry.sh start DIR --tls`).
    pub fn start_tls(name: &str) -> Registry {
        Self::start_with(name, &["--tls"])
    }

    fn start_with(name: &str, args: &[&str]) -> Registry {
        let scripts =
            std::env::var("PGOUTBOX_TEST_SCRIPTS").expect("PGOUTBOX_TEST_SCRIPTS: run through scripts/test.sh");
        let dir = std::env::temp_dir().join("pgoutbox-registry-tests").join(unique(name));
        let status = Command::new("bash")
            .arg(format!("{scripts}/registry.sh"))
            .arg("start")
            .arg(&dir)
            .args(args)
            .status()
            .expect("run scripts/registry.sh");
        assert!(status.success(), "scripts/registry.sh start failed (log in {})", dir.display());
        let env = std::fs::read_to_string(dir.join("env")).expect("the registry's env file");
        let value = |k: &str| env.lines().find_map(|l| l.strip_prefix(k)).map(str::to_string);
        Registry { url: value("URL=").expect("URL= in the env file"), ca: value("CA="), dir }
    }

    pub fn signal(&self, signal: &str) {
        let pid = std::fs::read_to_string(self.dir.join("pid")).expect("the registry's pid file");
        let status = Command::new("kill").arg(format!("-{signal}")).arg(pid.trim()).status().unwrap();
        assert!(status.success(), "kill -{signal} the registry");
    }

    /// An HTTP call to the registry: the status and the body.
    pub fn call(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        use std::io::{Read, Write};
        if let Some(ca) = &self.ca {
            let out = Command::new("curl")
                .args([
                    "-s",
                    "-X",
                    method,
                    "--cacert",
                    ca,
                    "-H",
                    "content-type: application/json",
                    "-w",
                    "\n%{http_code}",
                ])
                .args(if body.is_empty() { vec![] } else { vec!["-d", body] })
                .arg(format!("{}{path}", self.url))
                .output()
                .expect("curl");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
            return (code.trim().parse().unwrap_or(0), body.to_string());
        }
        let addr = self.url.trim_start_matches("http://");
        let mut s = std::net::TcpStream::connect(addr).expect("connect to the registry");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let req = format!(
            "{method} {path} HTTP/1.0\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = String::new();
        let _ = s.read_to_string(&mut raw);
        let code = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (code, raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
    }

    /// The schema a Confluent-format id names, through the Confluent-compatible API.
    pub fn schema(&self, id: u32) -> String {
        let (code, body) = self.call("GET", &format!("/apis/ccompat/v7/schemas/ids/{id}"), "");
        assert_eq!(code, 200, "schema {id}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["schema"].as_str().unwrap().to_string()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.signal("CONT");
        self.signal("KILL");
    }
}

pub async fn lsn(outbox: &Outbox) -> String {
    outbox.env.sql().await.query_one("SELECT pg_current_wal_lsn()::text", &[]).await.unwrap().get(0)
}

pub fn lsn_value(text: &str) -> u64 {
    let (hi, lo) = text.split_once('/').unwrap();
    (u64::from_str_radix(hi, 16).unwrap() << 32) | u64::from_str_radix(lo, 16).unwrap()
}

/// The id of a Confluent-format record (magic byte 0, 4-byte id).
pub fn confluent_id(value: &[u8]) -> u32 {
    assert_eq!(value[0], 0, "the magic byte");
    u32::from_be_bytes(value[1..5].try_into().unwrap())
}

/// Debian's nginx in front of a registry, asking for HTTP basic auth (as a registry behind an
/// authenticating proxy is run): `url` answers 401 without the right `user:password`, and passes
/// every other request to the registry.
pub struct AuthProxy {
    pub url: String,
    child: std::process::Child,
    dir: PathBuf,
}

impl AuthProxy {
    pub fn start(registry: &str, user: &str, password: &str) -> AuthProxy {
        let dir = std::env::temp_dir().join("pgoutbox-registry-tests").join(unique("authproxy"));
        std::fs::create_dir_all(&dir).unwrap();
        let hash = Command::new("openssl").args(["passwd", "-apr1", password]).output().expect("openssl passwd");
        assert!(hash.status.success(), "openssl passwd -apr1");
        std::fs::write(dir.join("htpasswd"), format!("{user}:{}", String::from_utf8_lossy(&hash.stdout))).unwrap();
        let d = dir.display();
        let check = format!("      auth_basic \"schema registry\";\n      auth_basic_user_file {d}/htpasswd;\n");
        Self::spawn(dir.clone(), registry, &check, "")
    }

    /// Asking for a bearer token instead: each request's `Authorization` header is checked at
    /// `introspect` (nginx's `auth_request`), which answers 200 for a token it accepts.
    pub fn bearer(registry: &str, introspect: &str) -> AuthProxy {
        let dir = std::env::temp_dir().join("pgoutbox-registry-tests").join(unique("bearerproxy"));
        std::fs::create_dir_all(&dir).unwrap();
        let check = "      auth_request /_token;\n";
        let token = format!(
            "    location = /_token {{\n      internal;\n      proxy_pass {introspect};\n      proxy_method GET;\n\
             proxy_pass_request_body off;\n      proxy_set_header Content-Length \"\";\n    }}\n"
        );
        Self::spawn(dir, registry, check, &token)
    }

    fn spawn(dir: PathBuf, registry: &str, check: &str, more: &str) -> AuthProxy {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let upstream = registry.trim_start_matches("http://").trim_end_matches('/');
        let d = dir.display();
        std::fs::write(
            dir.join("nginx.conf"),
            format!(
                "worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{ worker_connections 64; }}\n\
                 http {{\n  log_format headers '$request $status $http_target_sr_cluster';\n  access_log {d}/access.log headers;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
                 fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
                 server {{\n    listen 127.0.0.1:{port};\n    location / {{\n{check}      proxy_pass http://{upstream};\n    }}\n{more}  }}\n}}\n"
            ),
        )
        .unwrap();
        // Readable by nginx's workers, which drop root.
        let _ = Command::new("chmod").args(["-R", "a+rX"]).arg(&dir).status();
        let nginx = ["/usr/sbin/nginx", "nginx"].into_iter().find(|n| Command::new(n).arg("-v").output().is_ok());
        let child = Command::new(nginx.expect("nginx: scripts/install.sh installs it"))
            .args(["-p"])
            .arg(&dir)
            .args(["-c"])
            .arg(dir.join("nginx.conf"))
            .args(["-g", "daemon off;"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start nginx");
        let url = format!("http://127.0.0.1:{port}");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "nginx did not listen (log in {d})");
            std::thread::sleep(Duration::from_millis(50));
        }
        AuthProxy { url, child, dir }
    }

    /// The proxy's access log: each request line, its status and its `target-sr-cluster` header.
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default()
    }
}

impl Drop for AuthProxy {
    fn drop(&mut self) {
        // SIGTERM: the master stops its workers (SIGKILL would leave them serving).
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
