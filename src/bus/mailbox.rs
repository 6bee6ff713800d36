//! The run's channel: many senders (the sources' threads), one receiver (the session), and a
//! receiver that is not woken for every message.
//!
//! With `std::sync::mpsc` every send to a blocked receiver wakes it: on a fork loop the
//! session thread woke thousands of times for samples, taskstats records and the ptrace
//! tracer's events, each wake a context switch beside the workload. Here the receiver, once it
//! has had a message, naps for [`NAP`] and takes what piled up meanwhile in one go; only an
//! urgent message cuts a nap short (the sender says which: `bus::sink` makes the trackers'
//! batches urgent, which come at most every 10–20 ms). A receiver that found nothing during a
//! nap sleeps until the next message of any kind, so the first event after a quiet spell (a
//! lone EXEC line) is seen at once, and an idle run costs no wake-ups at all.
//!
//! Owns the queue and its wake-up rule; knows nothing of what the messages mean (the sender
//! says whether one is urgent).

use std::collections::VecDeque;
use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long the receiver lets messages pile up after it has had one: the live view (EXEC
/// lines) lags by at most this in a storm.
pub const NAP: Duration = Duration::from_millis(20);

struct Queue<T> {
    items: VecDeque<T>,
    /// The receiver waits for any message (not only an urgent one).
    asleep: bool,
}

struct Shared<T> {
    queue: Mutex<Queue<T>>,
    ready: Condvar,
}

/// The sending end; clone it for each source.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        // If this was the last sender, a waiting receiver must learn it. Senders are dropped
        // rarely, so every drop wakes it rather than guess from a count another drop may be
        // changing at the same moment.
        self.shared.ready.notify_one();
    }
}

/// The receiving end.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    /// Messages taken from the queue, not yet handed out.
    taken: VecDeque<T>,
    /// The last take found messages: the next wait is a nap.
    busy: bool,
    nap: Duration,
}

pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    with_nap(NAP)
}

fn with_nap<T>(nap: Duration) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue {
            items: VecDeque::new(),
            asleep: false,
        }),
        ready: Condvar::new(),
    });
    (
        Sender {
            shared: Arc::clone(&shared),
        },
        Receiver {
            shared,
            taken: VecDeque::new(),
            busy: false,
            nap,
        },
    )
}

fn lock<T>(shared: &Shared<T>) -> std::sync::MutexGuard<'_, Queue<T>> {
    // A sender that panicked while pushing left a queue that is still whole.
    shared.queue.lock().unwrap_or_else(|e| e.into_inner())
}

impl<T> Sender<T> {
    /// Queues `item`; wakes the receiver only when it sleeps or `urgent`.
    pub fn send(&self, item: T, urgent: bool) {
        let mut q = lock(&self.shared);
        q.items.push_back(item);
        let wake = urgent || q.asleep;
        drop(q);
        if wake {
            self.shared.ready.notify_one();
        }
    }
}

impl<T> Receiver<T> {
    fn disconnected(&self) -> bool {
        Arc::strong_count(&self.shared) == 1
    }

    /// The next message, waiting up to `timeout` (see the module header for when a wait ends
    /// early).
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        if let Some(item) = self.taken.pop_front() {
            return Ok(item);
        }
        let deadline = Instant::now() + timeout;
        let mut q = lock(&self.shared);
        loop {
            if !q.items.is_empty() {
                std::mem::swap(&mut self.taken, &mut q.items);
                self.busy = true;
                return Ok(self.taken.pop_front().expect("just taken"));
            }
            if self.disconnected() {
                return Err(RecvTimeoutError::Disconnected);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(RecvTimeoutError::Timeout);
            }
            let nap = std::mem::take(&mut self.busy);
            q.asleep = !nap;
            let wait = if nap { left.min(self.nap) } else { left };
            q = self
                .shared
                .ready
                .wait_timeout(q, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            q.asleep = false;
        }
    }

    /// The next message if one is queued.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        if let Some(item) = self.taken.pop_front() {
            return Ok(item);
        }
        let mut q = lock(&self.shared);
        match q.items.pop_front() {
            Some(item) => Ok(item),
            None if self.disconnected() => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// Every message queued now.
    pub fn try_iter(&mut self) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(move || self.try_recv().ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages come out in the order they were sent, across the receiver's takes.
    #[test]
    fn keeps_order() {
        let (tx, mut rx) = channel();
        for i in 0..5 {
            tx.send(i, false);
        }
        assert_eq!(rx.recv_timeout(Duration::from_millis(1)), Ok(0));
        tx.send(5, false);
        let rest: Vec<i32> = (0..5)
            .map(|_| rx.recv_timeout(Duration::from_secs(1)).unwrap())
            .collect();
        assert_eq!(rest, [1, 2, 3, 4, 5]);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    }

    /// A sleeping receiver wakes for any message at once; after a message it naps, and only
    /// an urgent one cuts the nap short. (A long nap, so that a loaded machine's scheduling
    /// delays cannot blur the three cases.)
    #[test]
    fn naps_after_a_message_and_wakes_for_urgent_ones() {
        let ms = Duration::from_millis;
        let (tx, mut rx) = with_nap(ms(300));
        let start = Instant::now();
        let sender = std::thread::spawn(move || {
            let at = |t: u64| std::thread::sleep(ms(t).saturating_sub(start.elapsed()));
            at(50);
            tx.send("first", false);
            at(60);
            tx.send("second", false);
            at(400);
            tx.send("urgent", true);
        });
        assert_eq!(rx.recv_timeout(ms(5000)), Ok("first"));
        let first = start.elapsed();
        assert!(first < ms(250), "asleep, woken at once: {first:?}");
        assert_eq!(rx.recv_timeout(ms(5000)), Ok("second"));
        let second = start.elapsed();
        assert!(second >= ms(340), "taken after the nap: {second:?}");
        assert_eq!(rx.recv_timeout(ms(5000)), Ok("urgent"));
        let urgent = start.elapsed();
        assert!(urgent < ms(600), "the nap cut short: {urgent:?}");
        sender.join().unwrap();
    }

    #[test]
    fn says_when_every_sender_is_gone() {
        let (tx, mut rx) = channel::<u8>();
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(1)),
            Err(RecvTimeoutError::Timeout)
        );
        let waiter = std::thread::spawn(move || rx.recv_timeout(Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(20));
        drop(tx);
        assert_eq!(waiter.join().unwrap(), Err(RecvTimeoutError::Disconnected));
    }
}
