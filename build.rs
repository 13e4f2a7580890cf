//! Records the commit the binary is built from, for `pgoutbox --version` and the REST API's `GET /`:
//! `PGOUTBOX_COMMIT` when set (the container build, which copies no `.git`), else the checkout's
//! `HEAD`, else `unknown`.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=PGOUTBOX_COMMIT");
    let commit = std::env::var("PGOUTBOX_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    // Built again when HEAD moves: HEAD itself (a checkout), the branch it names (a commit).
    if let Some(dir) = git(&["rev-parse", "--git-dir"]).map(PathBuf::from) {
        let mut watched = vec![dir.join("HEAD"), dir.join("packed-refs")];
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.push(dir.join(branch));
        }
        for path in watched.iter().filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    println!("cargo:rustc-env=PGOUTBOX_COMMIT={commit}");
}
