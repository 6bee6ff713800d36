//! What a tracker tells the memory sampler about the tree: the one call interface from the
//! trackers (and from the accounts, for their exit records) to another source, so they name
//! this trait and never the sampler.
//!
//! Owns only the trait. The sampler implements it (`source::sample`); trackers hold an
//! `Arc<dyn TreeWatcher>`. Must not import a source: everything here is plain values.

/// Told of every process of the tree as a tracker sees it, in the tracker's order.
pub trait TreeWatcher: Send + Sync {
    /// From here on, read each process's high-water mark too: the tracker cannot read it at
    /// the exit (netlink, or ebpf on a kernel that does not give it).
    fn read_peaks(&self);
    /// The command's root process, forked by ste and not yet exec'd.
    fn root_started(&self, tgid: i32);
    /// A process joined the tree, forked by `parent`.
    fn process_started(&self, tgid: i32, parent: i32);
    /// A process exec'd (a tracker that does not hold it at its exec stop). The tracker calls
    /// `execs_handled` once it has handled the records read with it.
    fn process_exec(&self, tgid: i32);
    /// The tracker has handled what it read with the execs of `tgids` (their ends among it):
    /// the sampler asks for a round of those still alive once they have settled.
    fn execs_handled(&self, tgids: &[i32]);
    /// A process is held at its exec stop, before the new image runs.
    fn exec_stopped(&self, tgid: i32);
    /// The process held at its exec stop runs again.
    fn exec_done(&self, tgid: i32);
    /// A process is gone.
    fn process_ended(&self, tgid: i32);
    /// The kernel's high-water resident size of `tgid`, read in its exit at `t_ns`.
    fn exit_peak(&self, tgid: i32, t_ns: u64, hwm_bytes: u64);
    /// A taskstats exit record of a thread of `tgid` (the accounts thread passes on every one
    /// of the machine's, not knowing the tree): its memory's high-water resident size then.
    /// Taken as the exit's mark only where the tracker reads none (after `read_peaks`).
    fn exit_record(&self, tgid: i32, hwm_bytes: u64);
    /// `tgid` is stopped in its exit with its memory attached and `rss_bytes` resident, of
    /// which `shared_bytes` file-backed or shared (when the tracker read it): a chance to read
    /// it one last time, before the tracker lets it go.
    fn at_exit(&self, tgid: i32, rss_bytes: u64, shared_bytes: Option<u64>);
}
