//! Client health: was speedmatrix itself the bottleneck during a window?
//!
//! Two signals, both cheap. The **lag** of the async runtime: a probe task asks to
//! wake every 10 ms and records how late it woke; when the runtime is saturated,
//! chunk timestamps are late by about as much. The **CPU** the process used over
//! the window, from `getrusage` (it includes the built-in simulated engine when
//! no `--url` is given).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sm_core::stats::percentile;

const PROBE_EVERY: Duration = Duration::from_millis(10);
/// Above this, the runtime lag may distort chunk timestamps noticeably.
pub const LAG_WARN_MS: f64 = 5.0;
/// Above this share of the cores the client can use, the client may be the bottleneck.
pub const CPU_WARN_PCT: f64 = 90.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Health {
    pub lag_ms_p99: f64,
    /// % of one core (up to 100 × `cores`).
    pub cpu_pct: f64,
    /// The cores the client could use at once ([`client_cores`]).
    pub cores: usize,
}

impl Health {
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.lag_ms_p99 > LAG_WARN_MS {
            w.push(format!(
                "the client was busy: its runtime woke {:.1} ms late (p99), so chunk timestamps may be late by as much",
                self.lag_ms_p99
            ));
        }
        // 90 % of one core is no bottleneck for a client with four: the limit is its cores'
        let cores = self.cores.max(1);
        if self.cpu_pct > CPU_WARN_PCT * cores as f64 {
            let of =
                if cores == 1 { "of a core".to_string() } else { format!("of one core, of the {cores} it can use,") };
            w.push(format!("the client used {:.0} % {of} during the window and may be the bottleneck", self.cpu_pct));
        }
        w
    }
}

/// A running probe; `finish` returns the health over `[from, now)`.
pub struct Probe {
    lags: Arc<Mutex<Vec<(Instant, f64)>>>,
    stop: Arc<AtomicBool>,
}

impl Probe {
    pub fn start() -> Probe {
        let lags = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (lags.clone(), stop.clone());
        tokio::spawn(async move {
            while !s.load(Ordering::Relaxed) {
                let due = Instant::now() + PROBE_EVERY;
                tokio::time::sleep_until(due.into()).await;
                let woke = Instant::now();
                let late = woke.saturating_duration_since(due).as_secs_f64() * 1000.0;
                l.lock().unwrap_or_else(|p| p.into_inner()).push((woke, late));
            }
        });
        Probe { lags, stop }
    }

    /// Stops the probe; the lag p99 over samples taken in `[from, to)`.
    pub fn finish(self, from: Instant, to: Instant, cpu: Option<f64>) -> Option<Health> {
        self.stop.store(true, Ordering::Relaxed);
        let lags = self.lags.lock().unwrap_or_else(|p| p.into_inner());
        let in_window: Vec<f64> = lags.iter().filter(|(t, _)| *t >= from && *t < to).map(|(_, l)| *l).collect();
        Some(Health { lag_ms_p99: percentile(&in_window, 99.0)?, cpu_pct: cpu.unwrap_or(0.0), cores: client_cores() })
    }
}

/// The measuring runtime's worker threads, for the record (`None` outside a runtime).
pub fn client_threads() -> Option<u32> {
    let handle = tokio::runtime::Handle::try_current().ok()?;
    u32::try_from(handle.metrics().num_workers()).ok()
}

/// The cores the client can use at once: the async runtime's worker threads (`--client-threads`),
/// at most the CPUs this process may run on (its affinity mask, e.g. `taskset`, and cgroup quota).
pub fn client_cores() -> usize {
    let workers = tokio::runtime::Handle::try_current().map_or(1, |h| h.metrics().num_workers());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    workers.min(cpus).max(1)
}

/// CPU seconds (user + system) this process has used.
pub fn process_cpu_seconds() -> Option<f64> {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    (rc == 0).then(|| {
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(usage.ru_utime) + tv(usage.ru_stime)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_only_past_the_thresholds() {
        assert!(Health { lag_ms_p99: 1.0, cpu_pct: 20.0, cores: 1 }.warnings().is_empty());
        let w = Health { lag_ms_p99: 12.0, cpu_pct: 95.0, cores: 1 }.warnings();
        assert_eq!(w.len(), 2);
        assert!(w[0].contains("12.0 ms late"));
        assert!(w[1].contains("95 % of a core"), "{w:?}");
    }

    #[test]
    fn the_cpu_warning_is_against_the_cores_the_client_has() {
        assert!(
            Health { lag_ms_p99: 1.0, cpu_pct: 95.0, cores: 2 }.warnings().is_empty(),
            "95 % of 2 cores is not busy"
        );
        let w = Health { lag_ms_p99: 1.0, cpu_pct: 185.0, cores: 2 }.warnings();
        assert_eq!(
            w,
            ["the client used 185 % of one core, of the 2 it can use, during the window and may be the bottleneck"]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn one_worker_thread_is_one_core() {
        assert_eq!(client_cores(), 1);
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let a = process_cpu_seconds().unwrap();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_add(i ^ (x >> 3));
        }
        std::hint::black_box(x);
        assert!(process_cpu_seconds().unwrap() > a);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_blocked_runtime_shows_as_lag() {
        let probe = Probe::start();
        let from = Instant::now();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // block the only worker thread (the test body itself runs elsewhere): the probe cannot wake on time
        tokio::spawn(async { std::thread::sleep(Duration::from_millis(60)) }).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let h = probe.finish(from, Instant::now(), None).unwrap();
        assert!(h.lag_ms_p99 > 20.0, "{h:?}");
    }
}
