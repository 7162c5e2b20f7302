//! What each class's users cost the generator: the time their tasks ran on the runtime's
//! threads, each poll timed and summed per class. A poll never waits (it returns
//! `Pending` instead), so its wall time is time on a core, but for what the kernel gave
//! other threads meanwhile. The report shares the generator's measured CPU out among the
//! classes in these proportions; the runtime's own work between polls (timers, the I/O
//! driver) falls to them in the same proportions.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Nanoseconds each class's tasks ran, by class index; shared by the round's tasks.
#[derive(Clone)]
pub(crate) struct ClassMeters(Arc<[AtomicU64]>);

impl ClassMeters {
    pub(crate) fn new(classes: usize) -> ClassMeters {
        ClassMeters((0..classes).map(|_| AtomicU64::new(0)).collect())
    }

    /// `task` as a task of class `class`: each of its polls timed to that class.
    pub(crate) fn meter<F: Future>(&self, class: usize, task: F) -> Metered<F> {
        Metered {
            task: Box::pin(task),
            meters: self.clone(),
            class,
        }
    }

    /// How long each class's tasks ran so far, by class index.
    pub(crate) fn busy(&self) -> Vec<Duration> {
        self.0
            .iter()
            .map(|n| Duration::from_nanos(n.load(Ordering::Relaxed)))
            .collect()
    }
}

/// A task whose polls add to its class's meter. Boxed: one allocation per user or
/// session, beside the task's own, for a future that needs no pin projection.
pub(crate) struct Metered<F> {
    task: Pin<Box<F>>,
    meters: ClassMeters,
    class: usize,
}

impl<F: Future> Future for Metered<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let began = Instant::now();
        let out = self.task.as_mut().poll(cx);
        let ran = u64::try_from(began.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if let Some(n) = self.meters.0.get(self.class) {
            n.fetch_add(ran, Ordering::Relaxed);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task that spins for `ms` on each of `polls` polls, yielding between them.
    async fn spin(polls: u32, ms: u64) {
        for _ in 0..polls {
            let until = Instant::now() + Duration::from_millis(ms);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn each_class_is_charged_the_time_its_tasks_ran_and_not_their_waits() {
        let m = ClassMeters::new(3);
        let heavy = tokio::spawn(m.meter(0, spin(4, 10)));
        let light = tokio::spawn(m.meter(1, async {
            spin(2, 5).await;
            // Waiting is not running: a sleep adds nothing.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }));
        heavy.await.unwrap();
        light.await.unwrap();
        let busy = m.busy();
        // Each spin is charged at least its length (more when the kernel ran others
        // meanwhile), and the light class's half-second sleep not at all.
        assert!(busy[0] >= Duration::from_millis(40), "{busy:?}");
        assert!(busy[1] >= Duration::from_millis(10), "{busy:?}");
        assert!(busy[1] < Duration::from_millis(400), "{busy:?}");
        assert_eq!(busy[2], Duration::ZERO);
        // A class index past the meters is charged nowhere, never a panic.
        m.meter(7, async {}).await;
    }
}
