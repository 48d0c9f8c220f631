//! What the report says about the run: machine, load, crate versions, source, date.

/// The run's context, taken before the first measurement.
pub struct Meta {
    pub date: String,
    /// CPU model, logical CPUs, rayon threads, OS and architecture.
    pub machine: String,
    pub cpu: String,
    pub threads: usize,
    pub versions: Vec<(String, String)>,
    /// The 1-minute load average at the start.
    pub load_start: String,
}

impl Meta {
    pub fn collect() -> Meta {
        let threads = rayon::current_num_threads();
        let cpu = cpu_model();
        let machine = format!(
            "{cpu}, {} logical CPUs (rayon threads: {threads}), {} {}",
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            std::env::consts::OS,
            std::env::consts::ARCH
        );
        let versions = crate_versions();
        let date = utc_now();
        let load_start = load_average();
        Meta {
            date,
            machine,
            cpu,
            threads,
            versions,
            load_start,
        }
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The 1-minute load average: other processes competing for the CPUs skew the figures.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// The source the binary was built from, when run inside the git checkout: commit, and
/// whether l3's sources had uncommitted changes.
pub fn source_revision() -> Option<String> {
    // The repository root (the bench is the workspace member `bench/`).
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    let dirty = git(&[
        "status",
        "--porcelain",
        "--",
        "src",
        "shaders",
        "Cargo.toml",
        "bench",
    ])
    .is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("git {commit} + uncommitted changes")
    } else {
        format!("git {commit}")
    })
}

fn crate_versions() -> Vec<(String, String)> {
    let lock = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock"));
    let wanted = [
        "png",
        "zune-png",
        "qoi",
        "image",
        "image-webp",
        "fdeflate",
        "wgpu",
        "rayon",
    ];
    let mut out = vec![("l3".to_string(), env!("CARGO_PKG_VERSION").to_string())];
    let mut name = None;
    for line in lock.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"').to_string());
        } else if let Some(v) = line.strip_prefix("version = ") {
            if let Some(n) = name.take() {
                if wanted.contains(&n.as_str()) && !out.iter().any(|(a, _)| *a == n) {
                    out.push((n, v.trim_matches('"').to_string()));
                }
            }
        }
    }
    out
}

fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}
