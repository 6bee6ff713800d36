//! What the trackers tell the sampler of the tree (a process starting, exec'ing, ending, its
//! exit's marks: the `bus::tree::TreeWatcher` calls), and when that wakes the sampling thread.
//!
//! Owns the live set's changes and the wake-up rule; reads nothing (a round at an exit stop
//! and the exit's marks are `exit.rs`'s, the thread's decisions `thread.rs`'s).

use super::budget::Pace;
use super::{Cached, EXEC_SETTLE_NS, Sampler, State};

impl State {
    /// `tgid` exec'd at `now`: readable again, its carry to start again from its new memory,
    /// and its image to be read once it has settled.
    fn exec_marked(&mut self, tgid: i32, now: u64) {
        self.generation += 1;
        if let Some(c) = self.live.get_mut(&tgid) {
            c.unreadable = false;
            c.before_exec = false;
            c.image = c.image.wrapping_add(1);
            c.exit_hwm = 0;
            c.max_rss = 0;
            c.max_rss_tree = 0.0;
            c.rest_hi = None;
            c.exec_seen = true;
            c.exec_ns = Some(now);
            c.pss = 0;
            c.round_asked = true;
        }
    }
}

impl Sampler {
    /// A process joined the tree, forked by `parent`.
    pub fn process_started(&self, tgid: i32, parent: i32) {
        let mut st = self.state.lock().expect("sampler lock");
        let parent = st.live.contains_key(&parent).then_some(parent);
        st.generation += 1;
        st.live.insert(
            tgid,
            Cached {
                parent,
                ..Cached::default()
            },
        );
        self.nudge_at_a_fixed_pace(&mut st);
    }

    /// The command's root process, forked by ste and not yet exec'd: counted from its exec.
    pub fn root_started(&self, tgid: i32) {
        let mut st = self.state.lock().expect("sampler lock");
        st.live.insert(
            tgid,
            Cached {
                before_exec: true,
                ..Cached::default()
            },
        );
    }

    /// A process exec'd: its memory changed completely. The round its new image wants is
    /// asked for by [`Sampler::execs_handled`], once the tracker has handled what it read
    /// with the exec (often the process's end too).
    pub fn process_exec(&self, tgid: i32) {
        self.exec_stopped(tgid);
        let mut st = self.state.lock().expect("sampler lock");
        let now = self.sink.now_ns();
        st.exec_marked(tgid, now);
    }

    /// The tracker has handled a batch of records in which `tgids` exec'd: a round is asked
    /// for the new images still alive, once the earliest has settled. Asked at each exec, the
    /// sampling thread was woken for a fork loop's every `/bin/true`, gone by the time it had
    /// settled (its exit was in the same batch).
    pub fn execs_handled(&self, tgids: &[i32]) {
        let mut st = self.state.lock().expect("sampler lock");
        let first = tgids
            .iter()
            .filter_map(|p| st.live.get(p))
            .filter(|c| c.round_asked && c.counted())
            .filter_map(|c| c.exec_ns)
            .min();
        if let Some(t) = first {
            self.nudge_by(&mut st, t + EXEC_SETTLE_NS);
        }
    }

    /// The observers' part of an exec, for a tracker that holds the process at its exec stop:
    /// called there, before the new image runs.
    pub fn exec_stopped(&self, tgid: i32) {
        for o in self.observers.read().expect("observers lock").iter() {
            o.exec(tgid);
        }
    }

    /// The sampler's own part of an exec: the process is readable again, its carry starts
    /// again from its new memory, and a round is asked for once it has settled. A tracker that
    /// stops at the exec calls it once the process runs again.
    pub fn exec_done(&self, tgid: i32) {
        let mut st = self.state.lock().expect("sampler lock");
        let now = self.sink.now_ns();
        st.exec_marked(tgid, now);
        self.nudge_by(&mut st, now + EXEC_SETTLE_NS);
    }

    /// A process is gone.
    pub fn process_ended(&self, tgid: i32) {
        for o in self.observers.read().expect("observers lock").iter() {
            o.ended(tgid);
        }
        let mut st = self.state.lock().expect("sampler lock");
        st.generation += 1;
        if let Some(c) = st.live.remove(&tgid) {
            self.remember_ended(&mut st, tgid, &c);
        }
        self.nudge_at_a_fixed_pace(&mut st);
    }

    /// A fork or an end asks for a round only at a fixed pace (`--interval`: every change of
    /// the tree read at once, whatever it costs). Within a budget they ask for none: a forked
    /// child is carried from its parent's counters, an end removes memory and cannot raise the
    /// peak, and on a fork loop those rounds read the shell while it forks (its memory map
    /// locked against the fork) to learn nothing the ticks did not.
    fn nudge_at_a_fixed_pace(&self, st: &mut State) {
        if matches!(self.pace, Pace::Fixed(_)) {
            self.nudge(st);
        }
    }

    /// Asks for a round soon. The sampling thread is woken only when the budget allows one
    /// now: in a fork storm, waking it for nothing would steal CPU from the workload and from
    /// the tracker.
    fn nudge(&self, st: &mut State) {
        self.nudge_by(st, 0);
    }

    /// Asks for a round that cannot start before `ready_ns` (a new image is not read before
    /// it settles). The thread is woken only when it sleeps past that: awake, it looks at the
    /// state again before it sleeps, and one that wakes in time on its own needs no wake-up.
    /// Waking it at every exec of a fork loop, to find nothing settled and sleep again, cost
    /// the tracker a system call and the sampler a context switch per program.
    fn nudge_by(&self, st: &mut State, ready_ns: u64) {
        st.nudged = true;
        let now = self.sink.now_ns();
        self.refill(st, now);
        if st.asleep_until_ns.is_some_and(|t| t > ready_ns) && self.wait_before_round(st, now) == 0
        {
            #[cfg(test)]
            {
                st.woken += 1;
            }
            self.wake.notify_one();
        }
    }
}

/// The trackers' view of the sampler: each call is the inherent method of the same name.
impl crate::bus::tree::TreeWatcher for Sampler {
    fn read_peaks(&self) {
        Sampler::read_peaks(self)
    }
    fn root_started(&self, tgid: i32) {
        Sampler::root_started(self, tgid)
    }
    fn process_started(&self, tgid: i32, parent: i32) {
        Sampler::process_started(self, tgid, parent)
    }
    fn process_exec(&self, tgid: i32) {
        Sampler::process_exec(self, tgid)
    }
    fn execs_handled(&self, tgids: &[i32]) {
        Sampler::execs_handled(self, tgids)
    }
    fn exec_stopped(&self, tgid: i32) {
        Sampler::exec_stopped(self, tgid)
    }
    fn exec_done(&self, tgid: i32) {
        Sampler::exec_done(self, tgid)
    }
    fn process_ended(&self, tgid: i32) {
        Sampler::process_ended(self, tgid)
    }
    fn exit_peak(&self, tgid: i32, t_ns: u64, hwm_bytes: u64) {
        Sampler::exit_peak(self, tgid, t_ns, hwm_bytes)
    }
    fn exit_record(&self, tgid: i32, hwm_bytes: u64) {
        Sampler::exit_record(self, tgid, hwm_bytes)
    }
    fn at_exit(&self, tgid: i32, rss_bytes: u64, shared_bytes: Option<u64>) {
        Sampler::at_exit(self, tgid, rss_bytes, shared_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::sink::Clock;

    /// A new image's round is asked for once the tracker has handled the batch its exec came
    /// in, and only when the process is still alive; the thread is woken for it only when it
    /// sleeps past the moment the image settles.
    #[test]
    fn an_exec_wakes_the_thread_only_for_a_live_image_it_would_sleep_past() {
        let (sink, _rx) = crate::bus::sink::Sink::new(Clock::start());
        let sampler = Sampler::new(Pace::Budget(0.01), sink);
        let woken = || sampler.state.lock().unwrap().woken;
        let asleep_for = |ns: u64| {
            let mut st = sampler.state.lock().unwrap();
            st.asleep_until_ns = Some(sampler.sink.now_ns() + ns);
        };
        sampler.process_started(1, 0);
        asleep_for(3600 * 1_000_000_000);
        // A short program: its exec and its end in one batch.
        sampler.process_started(2, 1);
        sampler.process_exec(2);
        sampler.process_ended(2);
        sampler.execs_handled(&[2]);
        assert_eq!(woken(), 0, "the program is gone: no round to ask for");
        // One still alive after the batch: woken, the thread sleeping an hour.
        sampler.process_started(3, 1);
        sampler.process_exec(3);
        assert_eq!(woken(), 0, "not at the exec itself");
        sampler.execs_handled(&[3]);
        assert_eq!(woken(), 1);
        // Not when the thread wakes before the image settles anyway.
        sampler.process_started(4, 1);
        sampler.process_exec(4);
        asleep_for(EXEC_SETTLE_NS / 2);
        sampler.execs_handled(&[4]);
        assert_eq!(woken(), 1, "it wakes in time on its own");
        // Nor when it is awake (it looks at the state before it sleeps).
        sampler.state.lock().unwrap().asleep_until_ns = None;
        sampler.execs_handled(&[4]);
        assert_eq!(woken(), 1);
    }
}
