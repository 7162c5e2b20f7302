//! A timer finer than tokio's, for the instants an operation is due to start (paced users,
//! open-model arrivals). tokio's timer wheel ticks in whole milliseconds and its workers
//! wait in `epoll_wait`, whose timeout is in milliseconds too, so a sleeper wakes up to a
//! millisecond late: that would be the start lag of every scheduled operation, and part of
//! its corrected latency.
//!
//! One round's [`Timer`] keeps the pending deadlines in a heap and arms one Linux
//! `timerfd` (nanosecond expiry) for the earliest. The timerfd is watched by tokio's own
//! reactor, so its expiry wakes a parked worker exactly as tokio's timer would: no thread
//! of ours, and no extra hand-over. (A first version woke tasks from a timer thread; the
//! two extra context switches per start cost about 70 µs of CPU each on a virtual machine.)
//!
//! A task is woken a lead before its deadline, to cover the worker's wake-up, and yields
//! until the instant itself. The lead is learnt: it tracks the 90th percentile of how long
//! after the expiry the task actually runs. A lead much longer than that would be spent
//! yielding, CPU taken from the server under test; a shorter one makes starts late.
//!
//! Precision has a price: each start that a worker parks and wakes for separately costs an
//! idle-to-busy transition, about 30 µs of system time per start on a virtual machine at
//! 20,000 paced starts/s, where tokio's millisecond ticks wake the worker once for all the
//! starts due in that tick (measured with `/usr/bin/time` on 64 users paced at 3.2 ms
//! against nginx, `--workers 1`). Above
//! [`PRECISE_UP_TO`] starts a second, where starts are at most 200 µs apart anyway, a
//! round uses tokio's timer. Elsewhere than Linux, tokio's timer is always used.

use std::time::Duration;

use tokio::time::Instant;

/// The highest rate of scheduled starts (per second, all classes of a round) that gets the
/// fine timer.
pub(crate) const PRECISE_UP_TO: f64 = 5_000.0;

/// The longest lead: beyond this a wake-up is a busy machine, which no lead fixes.
const MAX_LEAD_NS: u64 = 300_000;
/// How far one wake-up moves the lead: up 9 steps when it took longer than the lead, down
/// 1 when shorter, which settles where 1 in 10 take longer (the 90th percentile).
const STEP_NS: u64 = 1_000;

#[cfg(target_os = "linux")]
pub(crate) use linux::Timer;

#[cfg(not(target_os = "linux"))]
pub use fallback::Timer;

/// The learnt lead, shared by the timer's users.
#[derive(Debug)]
struct Lead(std::sync::atomic::AtomicU64);

impl Lead {
    fn new() -> Lead {
        Lead(std::sync::atomic::AtomicU64::new(50_000))
    }

    fn get(&self) -> Duration {
        Duration::from_nanos(self.0.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Learn from one wake-up that came `took` after it was due.
    fn observe(&self, took: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let lead = self.0.load(Relaxed);
        let next = if took > lead {
            (lead + 9 * STEP_NS).min(MAX_LEAD_NS)
        } else {
            lead.saturating_sub(STEP_NS)
        };
        // Concurrent updates may overwrite each other: the estimate only drifts by a step.
        self.0.store(next, Relaxed);
    }
}

/// The last stretch before `at`: let the other tasks run, and come back until it comes.
async fn yield_until(at: Instant) {
    while Instant::now() < at {
        tokio::task::yield_now().await;
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BinaryHeap;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll, Waker};

    use tokio::io::unix::AsyncFd;
    use tokio::time::Instant;

    use super::{Lead, yield_until};

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
        fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for Pending {
        fn cmp(&self, other: &Self) -> std::cmp::Ordering {
            // Reversed: BinaryHeap is a max-heap.
            other.wake_at.cmp(&self.wake_at)
        }
    }

    struct Queue {
        heap: BinaryHeap<Pending>,
        /// What the timerfd is set for.
        armed: Option<std::time::Instant>,
    }

    struct Inner {
        queue: Mutex<Queue>,
        fd: AsyncFd<OwnedFd>,
        lead: Lead,
    }

    impl Inner {
        fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
            self.queue.lock().unwrap_or_else(|e| e.into_inner())
        }

        /// Set the timerfd to expire at `at` (at once when it is past).
        fn arm(&self, at: std::time::Instant) {
            let d = at.saturating_duration_since(std::time::Instant::now());
            // A zero it_value disarms: one nanosecond is "now".
            let d = d.max(std::time::Duration::from_nanos(1));
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
                    tv_nsec: d.subsec_nanos() as libc::c_long,
                },
            };
            // SAFETY: the fd is our timerfd, alive while `self` is; both pointers are valid.
            let rc = unsafe {
                libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut())
            };
            // Its only failures are a bad descriptor or value (EBADF, EINVAL, EFAULT), which
            // the lines above rule out: tv_nsec is below a second, the fd is ours.
            debug_assert_eq!(
                rc,
                0,
                "timerfd_settime: {}",
                std::io::Error::last_os_error()
            );
        }

        /// Wake every entry that is due, and arm for the next. Waking only schedules the
        /// task, and no one holds an entry's lock while taking the queue's, so it is done
        /// under the queue's lock.
        fn fire(&self) {
            let now = std::time::Instant::now();
            let mut q = self.lock();
            while q.heap.peek().is_some_and(|p| p.wake_at <= now) {
                let Some(p) = q.heap.pop() else { break };
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
            q.armed = q.heap.peek().map(|p| p.wake_at);
            if let Some(at) = q.armed {
                self.arm(at);
            }
        }
    }

    /// A round's fine timer. Cheap to clone; its driving task ends when the last clone is
    /// dropped.
    #[derive(Clone)]
    pub(crate) struct Timer {
        inner: Option<Arc<Inner>>,
        _task: Option<Arc<Abort>>,
    }

    /// Ends the driving task when the last [`Timer`] goes.
    struct Abort(tokio::task::AbortHandle);

    impl Drop for Abort {
        fn drop(&mut self) {
            self.0.abort();
        }
    }

    impl Timer {
        /// A timer for a round whose schedules start `rate` operations a second, driven by
        /// a task on the current runtime: tokio's timer above [`super::PRECISE_UP_TO`], or
        /// should the kernel refuse a timerfd.
        pub(crate) fn start(rate: f64) -> Timer {
            if rate > super::PRECISE_UP_TO {
                return Timer::coarse();
            }
            // SAFETY: plain system call; the result is checked.
            let raw = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            };
            if raw < 0 {
                return Timer::coarse();
            }
            // SAFETY: `raw` is a new fd that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            // SAFETY: the OwnedFd is moved into the AsyncFd, which owns it until dropped: the
            // descriptor stays open and the same for the AsyncFd's whole life.
            let registered =
                unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) };
            let Ok(fd) = registered else {
                return Timer::coarse();
            };
            let inner = Arc::new(Inner {
                queue: Mutex::new(Queue {
                    heap: BinaryHeap::new(),
                    armed: None,
                }),
                fd,
                lead: Lead::new(),
            });
            let weak = Arc::downgrade(&inner);
            let task = tokio::spawn(async move {
                loop {
                    let Some(inner) = weak.upgrade() else { return };
                    let Ok(mut guard) = inner.fd.readable().await else {
                        return;
                    };
                    let mut buf = [0u8; 8];
                    // SAFETY: reads at most 8 bytes into an 8-byte buffer.
                    let n = unsafe {
                        libc::read(inner.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
                    };
                    if n < 0 {
                        guard.clear_ready();
                    }
                    drop(guard);
                    inner.fire();
                }
            });
            Timer {
                inner: Some(inner),
                _task: Some(Arc::new(Abort(task.abort_handle()))),
            }
        }

        /// tokio's timer, to the millisecond.
        fn coarse() -> Timer {
            Timer {
                inner: None,
                _task: None,
            }
        }

        /// Wait until `at`, to within a few microseconds on an idle machine.
        pub(crate) async fn sleep_until(&self, at: Instant) {
            let Some(inner) = &self.inner else {
                tokio::time::sleep_until(at).await;
                return;
            };
            let lead = inner.lead.get();
            if at.saturating_duration_since(Instant::now()) > lead {
                let wake_at = at.into_std() - lead;
                Registered {
                    inner,
                    wake_at,
                    entry: None,
                }
                .await;
                inner
                    .lead
                    .observe(std::time::Instant::now().saturating_duration_since(wake_at));
            }
            yield_until(at).await;
        }
    }

    /// Waiting in the heap for `wake_at`.
    struct Registered<'a> {
        inner: &'a Inner,
        wake_at: std::time::Instant,
        entry: Option<Arc<Entry>>,
    }

    impl std::future::Future for Registered<'_> {
        type Output = ();

        fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            match &self.entry {
                None => {
                    let entry = Arc::new(Entry {
                        fired: AtomicBool::new(false),
                        waker: Mutex::new(Some(cx.waker().clone())),
                    });
                    self.entry = Some(entry.clone());
                    let wake_at = self.wake_at;
                    let mut q = self.inner.lock();
                    q.heap.push(Pending { wake_at, entry });
                    if q.armed.is_none_or(|a| wake_at < a) {
                        q.armed = Some(wake_at);
                        self.inner.arm(wake_at);
                    }
                    Poll::Pending
                }
                Some(e) => {
                    if e.fired.load(Ordering::Acquire) {
                        return Poll::Ready(());
                    }
                    let mut w = e.waker.lock().unwrap_or_else(|e| e.into_inner());
                    if e.fired.load(Ordering::Acquire) {
                        return Poll::Ready(());
                    }
                    match &mut *w {
                        Some(old) if old.will_wake(cx.waker()) => {}
                        slot => *slot = Some(cx.waker().clone()),
                    }
                    Poll::Pending
                }
            }
        }
    }

    impl Drop for Registered<'_> {
        fn drop(&mut self) {
            // A waiter that gave up (the run stopped) leaves its heap item to fire into
            // nothing.
            if let Some(e) = &self.entry {
                e.waker.lock().unwrap_or_else(|e| e.into_inner()).take();
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod fallback {
    use tokio::time::Instant;

    /// tokio's timer, to the millisecond.
    #[derive(Clone)]
    pub struct Timer;

    impl Timer {
        pub fn start(_rate: f64) -> Timer {
            Timer
        }

        pub async fn sleep_until(&self, at: Instant) {
            tokio::time::sleep_until(at).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sleepers_wake_at_their_instant_and_never_before() {
        let timer = Timer::start(1000.0);
        // Interleaved deadlines, registered out of order, 1.3 to 4.8 ms away.
        let base = Instant::now() + Duration::from_millis(5);
        let mut tasks = Vec::new();
        for i in [7u64, 3, 6, 0, 5, 1] {
            let at = base - Duration::from_micros(500 * i + 200);
            let t = timer.clone();
            tasks.push(tokio::spawn(async move {
                t.sleep_until(at).await;
                (Instant::now() >= at, at)
            }));
        }
        for t in tasks {
            let (on_time, at) = t.await.unwrap();
            assert!(on_time, "woke before its instant {at:?}");
        }
        // An instant already past, and one inside any lead, return at their time too.
        timer
            .sleep_until(Instant::now() - Duration::from_millis(1))
            .await;
        let at = Instant::now() + Duration::from_micros(1);
        timer.sleep_until(at).await;
        assert!(Instant::now() >= at);
    }

    #[tokio::test]
    async fn a_dropped_sleeper_does_not_hold_up_the_others() {
        let timer = Timer::start(1000.0);
        let far = timer.sleep_until(Instant::now() + Duration::from_secs(3600));
        let mut far = Box::pin(far);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(far.as_mut().poll(&mut cx).is_pending());
        drop(far);
        let at = Instant::now() + Duration::from_millis(2);
        timer.sleep_until(at).await;
        assert!(Instant::now() >= at);
    }

    #[test]
    fn the_lead_settles_at_the_ninetieth_percentile_of_wake_ups() {
        let lead = Lead::new();
        // Nine in ten wake-ups take 20 µs, one in ten 200 µs.
        for i in 0..20_000 {
            let took = if i % 10 == 0 { 200 } else { 20 };
            lead.observe(Duration::from_micros(took));
        }
        let l = lead.get();
        assert!(
            l >= Duration::from_micros(20) && l <= Duration::from_micros(200),
            "{l:?}"
        );
        // All fast: it comes down to them, within the sawtooth of one rise (9 steps).
        for _ in 0..1_000 {
            lead.observe(Duration::from_micros(5));
        }
        assert!(lead.get() <= Duration::from_micros(15), "{:?}", lead.get());
    }
}
