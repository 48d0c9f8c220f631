//! Timing: one warm-up call, then timed repetitions (capped in seconds); median, min, max;
//! and the wait that ends a timed GPU call.

use std::time::Instant;

use anyhow::{anyhow, Result};
use serde::Serialize;

/// Seconds per call over the timed repetitions (in JSON: `median_s`, `min_s`, `max_s`, `reps`).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Stats {
    #[serde(rename = "median_s")]
    pub median: f64,
    #[serde(rename = "min_s")]
    pub min: f64,
    #[serde(rename = "max_s")]
    pub max: f64,
    pub reps: usize,
}

impl Stats {
    pub fn add(self, o: Stats) -> Stats {
        Stats {
            median: self.median + o.median,
            min: self.min + o.min,
            max: self.max + o.max,
            reps: if self.reps == 0 {
                o.reps
            } else {
                self.reps.min(o.reps)
            },
        }
    }
}

/// One warm-up call (whose result is returned, for verification), then up to `reps` timed
/// calls; fewer when the warm-up says `reps` calls would exceed `max_seconds`.
pub fn measure<T>(
    reps: usize,
    max_seconds: f64,
    f: impl FnMut() -> Result<T>,
) -> Result<(Stats, T)> {
    measure_each(reps, max_seconds, |_| {}, f)
}

/// As [`measure`], but before every call (the warm-up too) `evict` is written, untimed, so
/// that each timed call finds its input and output out of the caches: at every size the same
/// cache state, which a decode repeated into one buffer has only for outputs larger than the
/// caches.
pub fn measure_cold<T>(
    reps: usize,
    max_seconds: f64,
    evict: &mut [u8],
    f: impl FnMut() -> Result<T>,
) -> Result<(Stats, T)> {
    let before = |call: usize| {
        evict.fill(call as u8);
        std::hint::black_box(&*evict);
    };
    measure_each(reps, max_seconds, before, f)
}

/// [`measure`] with `before(call)` run, untimed, before each call (0 for the warm-up).
fn measure_each<T>(
    reps: usize,
    max_seconds: f64,
    mut before: impl FnMut(usize),
    mut f: impl FnMut() -> Result<T>,
) -> Result<(Stats, T)> {
    before(0);
    let t0 = Instant::now();
    let first = f()?;
    let n = timed_reps(reps, max_seconds, t0.elapsed().as_secs_f64());
    let mut times = Vec::with_capacity(n);
    for call in 1..=n {
        before(call);
        let t = Instant::now();
        let r = f()?;
        times.push(t.elapsed().as_secs_f64());
        std::hint::black_box(&r);
        drop(r);
    }
    Ok((stats_of(times), first))
}

/// Bytes written between cold calls ([`measure_cold`]): twice the last-level cache the
/// kernel reports for CPU 0, at least 64 MiB and at most 1 GiB (64 MiB where it reports
/// none).
pub fn eviction_bytes() -> usize {
    let llc = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index3/size")
        .ok()
        .and_then(|s| {
            let s = s.trim();
            let (digits, unit) =
                s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
            let n: usize = digits.parse().ok()?;
            Some(match unit {
                "K" => n << 10,
                "M" => n << 20,
                "G" => n << 30,
                _ => n,
            })
        })
        .unwrap_or(0);
    (2 * llc).clamp(64 << 20, 1 << 30)
}

/// Timed repetitions after a warm-up call that took `warm` seconds: `reps`, fewer (at least
/// one) when they would exceed `max_seconds`.
pub fn timed_reps(reps: usize, max_seconds: f64, warm: f64) -> usize {
    if warm * reps as f64 > max_seconds {
        ((max_seconds / warm.max(1e-9)) as usize).clamp(1, reps.max(1))
    } else {
        reps.max(1)
    }
}

/// Median, min and max of `times` (seconds; at least one).
pub fn stats_of(mut times: Vec<f64>) -> Stats {
    let n = times.len();
    times.sort_by(f64::total_cmp);
    let median = if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2.0
    };
    Stats {
        median,
        min: times[0],
        max: times[n - 1],
        reps: n,
    }
}

/// Waits until the queue's work is done.
pub fn gpu_wait(device: &wgpu::Device) -> Result<()> {
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| anyhow!("wgpu poll: {e}"))?;
    Ok(())
}
