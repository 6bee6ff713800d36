//! Where the wall time went, summed over every task of the tree from each process's ledger
//! (CPU, user and system, the run queue, block I/O and swap/reclaim waits where delay
//! accounting measured them, the rest), with the sources the sums came from; and the waits no
//! process could have had, dropped before they are summed.
//!
//! Part of the accounting fold (`account.rs` calls it when the Run is finished); reads and
//! writes only the Run.

use crate::model::{LedgerSource, Run, TimeBreakdown};

/// Drops (to null) the block-I/O and swap/reclaim waits of each process whose figure is more
/// than its threads could have waited in its life, and returns how many processes had one.
/// The kernel times a wait from the moment it began, noted only while delay accounting is on
/// (`kernel/delayacct.c`): a wait that began with it off and ended with it on is timed from 0,
/// the machine's whole uptime (seen: a block-I/O wait of 10h05m on a 6.7 s build, while
/// another run switched accounting on).
pub(super) fn drop_impossible_waits(run: &mut Run) -> u64 {
    let end = run.totals.wall_ns;
    let mut dropped = 0;
    for p in &mut run.processes {
        let life = p
            .end_ns
            .unwrap_or(end)
            .saturating_sub(p.start_ns)
            .saturating_mul(u64::from(p.threads.max(1)));
        let Some(l) = p.ledger.as_mut() else {
            continue;
        };
        let mut any = false;
        for f in [l.taskstats.as_deref_mut(), l.last_switch.as_deref_mut()]
            .into_iter()
            .flatten()
        {
            let waits = f.blkio_delay_ns.unwrap_or(0) + f.swap_reclaim_delay_ns.unwrap_or(0);
            if waits > life {
                f.blkio_delay_ns = None;
                f.swap_reclaim_delay_ns = None;
                any = true;
            }
        }
        dropped += u64::from(any);
    }
    dropped
}

pub(super) fn time(run: &Run, delays_on: bool) -> Option<TimeBreakdown> {
    let mut t = TimeBreakdown {
        wall_ns: run.totals.wall_ns,
        ..Default::default()
    };
    let mut sources: Vec<&'static str> = Vec::new();
    let mut any = false;
    let add = |acc: &mut Option<u64>, v: Option<u64>| {
        if let Some(v) = v {
            // Saturating: a crafted record's figures must not wrap the sum.
            *acc = Some(acc.unwrap_or(0).saturating_add(v));
        }
    };
    for p in &run.processes {
        let Some(l) = &p.ledger else {
            t.processes_without_figures += 1;
            continue;
        };
        let Some((cpu, src)) = l.cpu() else {
            t.processes_without_figures += 1;
            continue;
        };
        any = true;
        // Every source a figure came from (the CPU's is often not the waits').
        let mut from = |x: Option<(u64, LedgerSource)>| {
            let (v, src) = x?;
            if !sources.contains(&src.name()) {
                sources.push(src.name());
            }
            Some(v)
        };
        add(&mut t.cpu_ns, from(Some((cpu, src))));
        add(&mut t.user_ns, from(l.best(|f| f.user_ns)));
        add(&mut t.sys_ns, from(l.best(|f| f.sys_ns)));
        add(&mut t.run_queue_ns, from(l.best(|f| f.run_queue_ns)));
        if delays_on {
            add(&mut t.blkio_ns, from(l.best(|f| f.blkio_delay_ns)));
            add(
                &mut t.swap_reclaim_ns,
                from(l.best(|f| f.swap_reclaim_delay_ns)),
            );
        }
        let life = p.end_ns.map(|e| e.saturating_sub(p.start_ns));
        let task_time =
            from(l.best(|f| f.task_time_ns)).or(if p.threads == 1 { life } else { None });
        add(&mut t.task_time_ns, task_time);
    }
    if !any {
        return None;
    }
    if let Some(total) = t.task_time_ns {
        let accounted = crate::units::sum([
            t.cpu_ns.unwrap_or(0),
            t.run_queue_ns.unwrap_or(0),
            t.blkio_ns.unwrap_or(0),
            t.swap_reclaim_ns.unwrap_or(0),
        ]);
        t.other_ns = Some(total.saturating_sub(accounted));
    }
    t.from = sources.join(" + ");
    Some(t)
}
