//! CPU time and memory of a process, from /proc.

#[derive(Debug, Default, Clone, Copy)]
pub struct Usage {
    pub cpu_seconds: f64,
    pub peak_rss_mb: f64,
    pub rss_mb: f64,
}

pub fn usage(pid: u32) -> Usage {
    let mut u = Usage::default();
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Fields after the parenthesised command; utime and stime are fields 14 and 15.
        if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            u.cpu_seconds = (ticks(11) + ticks(12)) / 100.0;
        }
    }
    if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
        for line in status.lines() {
            let kb = || line.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 1024.0;
            if line.starts_with("VmHWM:") {
                u.peak_rss_mb = kb();
            } else if line.starts_with("VmRSS:") {
                u.rss_mb = kb();
            }
        }
    }
    u
}
