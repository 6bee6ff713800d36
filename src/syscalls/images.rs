//! Per-image system call counts, as the recorder folds `SyscallsOf` events: a pure tally, so a
//! replayed record gives the same images.

use super::Counts;
use crate::model::{CallCount, ImageCalls, Syscalls};
use std::collections::BTreeMap;

/// Calls per (process index, exec index): the pid and the counts.
#[derive(Default)]
pub struct ImageTally {
    images: BTreeMap<(usize, Option<usize>), (i32, Counts)>,
}

impl ImageTally {
    /// Adds the calls of one thread to the image `exec` of process `process` (pid `pid`).
    pub fn add(&mut self, process: usize, pid: i32, exec: Option<usize>, calls: &[CallCount]) {
        let (_, image) = self
            .images
            .entry((process, exec))
            .or_insert_with(|| (pid, Counts::new()));
        for c in calls {
            image
                .entry((c.compat, c.nr))
                .and_modify(|m| m.merge(c))
                .or_insert(*c);
        }
    }

    /// Puts the images into the summary, and counts the tree's calls that are in none.
    pub fn finish(&mut self, sc: &mut Syscalls) {
        if !sc.per_process {
            return;
        }
        let images = std::mem::take(&mut self.images);
        sc.images = images
            .into_iter()
            .map(|((process, exec), (pid, calls))| {
                let mut calls: Vec<CallCount> = calls.into_values().collect();
                calls.sort_by(|a, b| {
                    b.calls
                        .cmp(&a.calls)
                        .then((a.compat, a.nr).cmp(&(b.compat, b.nr)))
                });
                ImageCalls {
                    process,
                    pid,
                    exec,
                    calls,
                }
            })
            .collect();
        let total: u64 = sc.calls.iter().map(|r| r.calls).sum();
        let in_images: u64 = sc
            .images
            .iter()
            .flat_map(|i| &i.calls)
            .map(|c| c.calls)
            .sum();
        sc.uncounted.per_process_missing = total.saturating_sub(in_images);
    }
}
