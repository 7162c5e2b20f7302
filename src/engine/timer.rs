//! A timer finer than tokio's, for the instants an operation is due to start (paced users,
//! open-model arrivals). tokio's timer wheel ticks in whole milliseconds and its workers
//! wait in `epoll_wait`, whose timeout is in milliseconds too, so a sleeper wakes up to a
//! millisecond late: that would be the start lag of every scheduled operation, and part of
//! its corrected latency.
//!
//! One thread per process keeps the pending deadlines in a heap and waits for the earliest
//! on a condition variable, with its timer slack set to 1 µs (Linux lets a sleeping thread
//! wake up to 50 µs late by default). It wakes the task [`LEAD`] before the deadline, to
//! cover the hand-over to a tokio worker, and the task yields until the instant itself.
//! A task that waits costs nothing until then; the price is one thread wake-up per
//! deadline and at most [`LEAD`] of yielding.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

/// How long before a deadline its task is woken: the timer thread's own wake-up and the
/// hand-over to a parked tokio worker take tens of microseconds on a virtual machine.
pub const LEAD: Duration = Duration::from_micros(150);

/// One waiting task.
struct Entry {
    fired: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

/// A heap item: the earliest wake-up first.
struct Pending {
    wake_at: std::time::Instant,
    entry: Arc<Entry>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        self.wake_at == other.wake_at
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        // Reversed: BinaryHeap is a max-heap.
        other.wake_at.cmp(&self.wake_at)
    }
}

struct Shared {
    heap: Mutex<BinaryHeap<Pending>>,
    changed: Condvar,
}

fn shared() -> &'static Arc<Shared> {
    static SHARED: OnceLock<Arc<Shared>> = OnceLock::new();
    SHARED.get_or_init(|| {
        let s = Arc::new(Shared {
            heap: Mutex::new(BinaryHeap::new()),
            changed: Condvar::new(),
        });
        let t = s.clone();
        std::thread::Builder::new()
            .name("loadmix-timer".into())
            .spawn(move || run(&t))
            .expect("cannot start the timer thread");
        s
    })
}

/// The timer thread: wake every entry whose time has come, then wait for the next.
fn run(s: &Shared) {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    let mut heap = s.heap.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let now = std::time::Instant::now();
        while heap.peek().is_some_and(|p| p.wake_at <= now) {
            if let Some(p) = heap.pop() {
                p.entry.fired.store(true, Ordering::Release);
                let waker = p
                    .entry
                    .waker
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take();
                if let Some(w) = waker {
                    w.wake();
                }
            }
        }
        heap = match heap.peek().map(|p| p.wake_at) {
            Some(at) => {
                s.changed
                    .wait_timeout(heap, at.saturating_duration_since(now))
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => s.changed.wait(heap).unwrap_or_else(|e| e.into_inner()),
        };
    }
}

/// Wait until `at`, to within a few microseconds on an idle machine.
pub fn sleep_until(at: Instant) -> Sleep {
    Sleep { at, entry: None }
}

/// The future of [`sleep_until`].
pub struct Sleep {
    at: Instant,
    entry: Option<Arc<Entry>>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now = Instant::now();
        if now >= self.at {
            return Poll::Ready(());
        }
        let at = self.at;
        match &self.entry {
            None if at - now <= LEAD => {}
            None => {
                let entry = Arc::new(Entry {
                    fired: AtomicBool::new(false),
                    waker: Mutex::new(Some(cx.waker().clone())),
                });
                self.entry = Some(entry.clone());
                let wake_at = at.into_std() - LEAD;
                let s = shared();
                let mut heap = s.heap.lock().unwrap_or_else(|e| e.into_inner());
                let earliest = heap.peek().is_none_or(|p| wake_at < p.wake_at);
                heap.push(Pending { wake_at, entry });
                drop(heap);
                if earliest {
                    s.changed.notify_one();
                }
                return Poll::Pending;
            }
            Some(e) if !e.fired.load(Ordering::Acquire) => {
                let mut w = e.waker.lock().unwrap_or_else(|e| e.into_inner());
                if !e.fired.load(Ordering::Acquire) {
                    match &mut *w {
                        Some(old) if old.will_wake(cx.waker()) => {}
                        slot => *slot = Some(cx.waker().clone()),
                    }
                    return Poll::Pending;
                }
            }
            Some(_) => {}
        }
        // Within the lead of the instant: yield to the other tasks until it comes.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        // A waiter that gave up (the run stopped) leaves its heap item to fire into nothing.
        if let Some(e) = &self.entry {
            e.waker.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sleepers_wake_at_their_instant_and_never_before() {
        // Interleaved deadlines, registered out of order, 1.3 to 4.8 ms away.
        let base = Instant::now() + Duration::from_millis(5);
        let mut tasks = Vec::new();
        for i in [7u64, 3, 6, 0, 5, 1] {
            let at = base - Duration::from_micros(500 * i + 200);
            tasks.push(tokio::spawn(async move {
                sleep_until(at).await;
                (Instant::now() >= at, at)
            }));
        }
        for t in tasks {
            let (on_time, at) = t.await.unwrap();
            assert!(on_time, "woke before its instant {at:?}");
        }
        // An instant already past, and one inside the lead, return at their time too.
        sleep_until(Instant::now() - Duration::from_millis(1)).await;
        let at = Instant::now() + LEAD / 2;
        sleep_until(at).await;
        assert!(Instant::now() >= at);
    }

    #[tokio::test]
    async fn a_dropped_sleeper_does_not_hold_up_the_others() {
        let mut far = Box::pin(sleep_until(Instant::now() + Duration::from_secs(3600)));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(far.as_mut().poll(&mut cx).is_pending());
        drop(far);
        let at = Instant::now() + Duration::from_millis(2);
        sleep_until(at).await;
        assert!(Instant::now() >= at);
    }
}
