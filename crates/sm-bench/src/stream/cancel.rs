//! The cancel signal a stream polls after every chunk, at the cost of an atomic load.
//!
//! `watch::Receiver::wait_for` waits on tokio's `Notify`, whose `Notified` takes the waiters'
//! lock at every poll, even when nothing changed: about 4 % of the client's CPU at 1,000 streams
//! (docs/performance.md). A request's loop polls its cancel future once per chunk, so this one
//! polls the inner future again only when it could have a different answer: the channel's version
//! moved, or the task's waker is not the one the inner future registered.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::sync::watch;

/// Resolves once the channel holds `true`, or its sender is gone (both mean: stop).
pub struct Cancelled<'a> {
    inner: Pin<Box<dyn Future<Output = ()> + Send + 'a>>,
    /// A clone that never marks a value seen: `has_changed` says whether a value was sent
    /// since the inner future first looked.
    probe: watch::Receiver<bool>,
    /// The waker the inner future registered at its last `Pending`.
    registered: Option<Waker>,
}

impl<'a> Cancelled<'a> {
    pub fn new(rx: &'a mut watch::Receiver<bool>) -> Cancelled<'a> {
        let probe = rx.clone();
        Cancelled {
            // Unconstrained: out of coop budget, tokio's own wrapper would answer `Pending`
            // without registering the waker, and the skip below would then never register it.
            inner: Box::pin(tokio::task::unconstrained(async move {
                // An error means the sender is gone: treat it as cancelled.
                let _ = rx.wait_for(|v| *v).await;
            })),
            probe,
            registered: None,
        }
    }

    /// Nothing the inner future waits for happened since its last `Pending`, and it would wake
    /// this same task: polling it again would only take its lock to say `Pending` once more.
    fn unchanged(&self, cx: &Context<'_>) -> bool {
        let same_task = self.registered.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
        same_task && matches!(self.probe.has_changed(), Ok(false))
    }
}

impl Future for Cancelled<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.unchanged(cx) {
            return Poll::Pending;
        }
        match self.inner.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(()),
            Poll::Pending => {
                match &mut self.registered {
                    Some(w) => w.clone_from(cx.waker()),
                    None => self.registered = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    /// A waker that counts its wake-ups.
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn waker() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (Arc::clone(&count), Waker::from(count))
    }

    fn poll(f: &mut Cancelled<'_>, w: &Waker) -> Poll<()> {
        Pin::new(f).poll(&mut Context::from_waker(w))
    }

    #[test]
    fn resolves_after_many_pending_polls_and_wakes_the_task() {
        let (tx, mut rx) = watch::channel(false);
        let mut c = Cancelled::new(&mut rx);
        let (count, w) = waker();
        for _ in 0..100 {
            assert_eq!(poll(&mut c, &w), Poll::Pending);
        }
        tx.send(true).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "the registered waker is woken");
        assert_eq!(poll(&mut c, &w), Poll::Ready(()));
    }

    #[test]
    fn a_new_waker_is_registered_and_woken() {
        let (tx, mut rx) = watch::channel(false);
        let mut c = Cancelled::new(&mut rx);
        let (first, w1) = waker();
        let (second, w2) = waker();
        assert_eq!(poll(&mut c, &w1), Poll::Pending);
        // the task moved (another waker): the inner future must register it, not skip
        assert_eq!(poll(&mut c, &w2), Poll::Pending);
        tx.send(true).unwrap();
        assert_eq!(second.0.load(Ordering::SeqCst), 1, "the latest waker is the one woken");
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(poll(&mut c, &w2), Poll::Ready(()));
    }

    #[test]
    fn a_false_value_does_not_cancel_and_true_still_does() {
        let (tx, mut rx) = watch::channel(false);
        let mut c = Cancelled::new(&mut rx);
        let (_, w) = waker();
        assert_eq!(poll(&mut c, &w), Poll::Pending);
        tx.send(false).unwrap();
        for _ in 0..3 {
            assert_eq!(poll(&mut c, &w), Poll::Pending, "a change to false is no cancel");
        }
        tx.send(true).unwrap();
        assert_eq!(poll(&mut c, &w), Poll::Ready(()));
    }

    /// A stream that read many chunks in one poll spent the task's coop budget: the cancel must
    /// still register its waker then, or a quiet stream would never hear it.
    #[tokio::test(flavor = "current_thread")]
    async fn out_of_budget_the_cancel_still_wakes_the_task() {
        let (tx, mut rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut c = Cancelled::new(&mut rx);
            let mut first = true;
            std::future::poll_fn(|cx| {
                while std::mem::take(&mut first) {
                    let spend = std::pin::pin!(tokio::task::consume_budget());
                    first = spend.poll(cx).is_ready();
                }
                Pin::new(&mut c).poll(cx)
            })
            .await
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        tx.send(true).unwrap();
        let woke = tokio::time::timeout(std::time::Duration::from_secs(10), task).await;
        assert!(woke.is_ok(), "the cancel did not wake a task whose budget was spent");
    }

    #[test]
    fn true_before_the_first_poll_and_a_dropped_sender_cancel() {
        let (tx, mut rx) = watch::channel(true);
        let (_, w) = waker();
        assert_eq!(poll(&mut Cancelled::new(&mut rx), &w), Poll::Ready(()));
        drop(tx);
        let (tx, mut rx) = watch::channel(false);
        let mut c = Cancelled::new(&mut rx);
        assert_eq!(poll(&mut c, &w), Poll::Pending);
        drop(tx);
        assert_eq!(poll(&mut c, &w), Poll::Ready(()), "a sender gone means stop");
    }
}
