//! A periodic sampler: a background task that calls an async fetch every interval and stamps each
//! answer on the run's monotonic clock, so no scrape ever waits on (or delays) a stream's tokens.
//! Generic over what is fetched: the server's `/metrics` (methodology §14.1), and any other
//! source read over a cell's window.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// Samples kept at most; past it the sampler stops fetching (an interval of 100 ms over a day's
/// window would still fit).
pub const MAX_SAMPLES: usize = 1 << 20;

/// A running sampler; [`Sampler::stop`] ends it and returns its samples.
pub struct Sampler<T> {
    stop: watch::Sender<bool>,
    /// Taken by [`Sampler::stop`]; still here on drop, when it is aborted.
    task: Option<JoinHandle<Vec<(Duration, T)>>>,
    /// Fires once the first fetch has answered (or failed).
    first: Option<oneshot::Receiver<()>>,
}

impl<T: Send + 'static> Sampler<T> {
    /// Starts fetching at once, then every `interval` (a fetch slower than that delays the next
    /// one, never overlaps it). Offsets are from `origin`, at the midpoint of each fetch: the
    /// server read its counters somewhere between the request and its answer. A fetch that gives
    /// `None` (failed) leaves no sample.
    pub fn start<F, Fut>(origin: Instant, interval: Duration, mut fetch: F) -> Sampler<T>
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Option<T>> + Send,
    {
        let (stop, mut stopped) = watch::channel(false);
        let (first_tx, first) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut out = Vec::new();
            let mut next = tokio::time::Instant::now();
            let mut first_tx = Some(first_tx);
            loop {
                sample(origin, &mut fetch, &mut out).await;
                if let Some(tx) = first_tx.take() {
                    let _ = tx.send(());
                }
                next += interval;
                tokio::select! {
                    _ = stopped.wait_for(|s| *s) => break,
                    _ = tokio::time::sleep_until(next) => {}
                }
                if out.len() >= MAX_SAMPLES {
                    let _ = stopped.wait_for(|s| *s).await;
                    return out;
                }
            }
            // the stop instant is the end of what was sampled: one last fetch there
            sample(origin, &mut fetch, &mut out).await;
            out
        });
        Sampler { stop, task: Some(task), first: Some(first) }
    }

    /// Waits until the first fetch has answered: a span whose requests must all come after the
    /// first read (so the counters' difference holds every one of them) starts after this.
    pub async fn first_taken(&mut self) {
        if let Some(first) = self.first.take() {
            let _ = first.await;
        }
    }

    /// Takes one last sample now and returns every sample, in order.
    pub async fn stop(mut self) -> Vec<(Duration, T)> {
        let _ = self.stop.send(true);
        match self.task.take() {
            Some(task) => task.await.unwrap_or_default(),
            None => Vec::new(),
        }
    }
}

impl<T> Drop for Sampler<T> {
    fn drop(&mut self) {
        // dropped without stop (a cell stopped early): nothing waits for the samples
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

async fn sample<T, F, Fut>(origin: Instant, fetch: &mut F, out: &mut Vec<(Duration, T)>)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let sent = Instant::now();
    let value = fetch().await;
    let answered = Instant::now();
    if let Some(v) = value {
        let mid = sent + (answered - sent) / 2;
        out.push((mid.saturating_duration_since(origin), v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn samples_until_stop_and_once_more_at_it() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let origin = Instant::now();
        let mut sampler = Sampler::start(origin, Duration::from_millis(20), move || {
            let n = c.fetch_add(1, Ordering::Relaxed);
            // every third fetch fails and leaves no sample
            async move { (n % 3 != 2).then_some(n) }
        });
        sampler.first_taken().await;
        assert!(calls.load(Ordering::Relaxed) >= 1, "the first fetch is done");
        tokio::time::sleep(Duration::from_millis(90)).await;
        let before_stop = calls.load(Ordering::Relaxed);
        let samples = sampler.stop().await;
        let calls = calls.load(Ordering::Relaxed);
        assert_eq!(calls, before_stop + 1, "one last fetch at the stop");
        let values: Vec<u32> = samples.iter().map(|s| s.1).collect();
        assert_eq!(values, (0..calls).filter(|n| n % 3 != 2).collect::<Vec<_>>());
        assert!(samples.windows(2).all(|w| w[0].0 <= w[1].0), "in order");
    }

    #[tokio::test]
    async fn a_dropped_sampler_stops_fetching() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let sampler = Sampler::start(Instant::now(), Duration::from_millis(10), move || {
            c.fetch_add(1, Ordering::Relaxed);
            async { Some(()) }
        });
        tokio::time::sleep(Duration::from_millis(25)).await;
        drop(sampler);
        let seen = calls.load(Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(calls.load(Ordering::Relaxed), seen);
    }
}
