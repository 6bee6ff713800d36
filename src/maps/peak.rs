//! `--maps-at-peak`: when the tree's PSS reaches a new high, map its largest processes
//! (smaps, and as root page flags), keep the map taken at the highest round, and hand it to
//! the recorder when the run ends.
//!
//! Owns the snapshot policy and its CPU budget. A map costs far more than a PSS round (full
//! smaps plus the page walk: ~0.1 s per resident GiB as root), so it has a token bucket of its
//! own: CPU accrues at `budget` × wall time (and may be saved up for a while, so a long hold
//! can pay for one large map), each map spends what it measurably cost. A new high is mapped
//! when it is affordable and at least 5 % above the last map, or when a high that could not be
//! afforded is still held once it can. At a ptrace exit stop — the last moment the exiting
//! process's memory can be seen — a new high is mapped even with too few tokens left (never
//! with the bucket already in debt); that overdraft is counted and reported. Everything spent
//! is reported, never hidden in the sampler's figures.

use crate::event::Event;
use crate::maps::MapReader;
use crate::model::maps::{MemoryAtPeak, PeakMapsInfo, PeakSnapshot};
use crate::sample::{RoundInfo, RoundObserver, Sampler};
use crate::sink::Sink;
use std::sync::{Arc, Mutex};

/// Registers the maps at the peak with the sampler when asked for (`--maps-at-peak`).
pub fn attach(opts: Option<PeakOptions>, sampler: &Sampler, sink: &Sink) -> Option<Arc<PeakMaps>> {
    let p = Arc::new(PeakMaps::new(opts?, sink.clone()));
    sampler.observe(p.clone());
    Some(p)
}

/// How the maps at the peak are taken.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeakOptions {
    /// CPU the maps may use, as a fraction of one core.
    pub budget: f64,
    /// Keep each mapping's page ranges (`ste maps -- COMMAND`), not only its totals.
    pub ranges: bool,
}

/// At most this many processes are mapped per snapshot, largest first, …
const MAX_PROCESSES: usize = 8;
/// … stopping once they hold this share of the round's PSS.
const COVERED: f64 = 0.95;
/// A new high is worth a new map when it is this much above the last map.
const GROWTH: f64 = 1.05;
/// A high that could not be afforded is mapped later if the tree still holds this share of it.
const STILL_HELD: f64 = 0.97;
/// The bucket may save up this much wall time's worth of budget.
const SAVINGS_WALL_NS: f64 = 10e9;
/// And starts with this much wall time's worth.
const START_WALL_NS: f64 = 1e9;
/// First guess of a map's cost per resident page (smaps ~80 ns, pagemap and flags the rest),
/// and per process; refined after each map.
const GUESS_NS_PER_PAGE: f64 = 200.0;
const NS_PER_PROCESS: f64 = 150_000.0;

pub struct PeakMaps {
    opts: PeakOptions,
    sink: Sink,
    state: Mutex<State>,
}

struct State {
    reader: MapReader,
    tokens_ns: f64,
    last_refill_ns: u64,
    ns_per_page: f64,
    best: Option<PeakSnapshot>,
    /// Highest round seen, and whether it still waits for a map.
    max_seen: u64,
    pending: bool,
    info: PeakMapsInfo,
}

impl PeakMaps {
    pub fn new(opts: PeakOptions, sink: Sink) -> PeakMaps {
        let mut reader = MapReader::new("/proc");
        let page_flags = reader.page_flags_readable();
        PeakMaps {
            opts,
            sink,
            state: Mutex::new(State {
                reader,
                tokens_ns: START_WALL_NS * opts.budget,
                last_refill_ns: 0,
                ns_per_page: GUESS_NS_PER_PAGE,
                best: None,
                max_seen: 0,
                pending: false,
                info: PeakMapsInfo {
                    budget: opts.budget,
                    page_flags,
                    ..Default::default()
                },
            }),
        }
    }

    /// Emits the map at the peak and what it cost. Call once the sampler has stopped.
    pub fn finish(&self) {
        let st = self.state.lock().expect("peak maps lock");
        self.sink.emit(Event::MemoryAtPeak {
            peak: MemoryAtPeak {
                snapshot: st.best.clone(),
                info: st.info.clone(),
            },
        });
    }
}

impl RoundObserver for PeakMaps {
    fn round_done(&self, r: &RoundInfo<'_>) {
        let mut st = self.state.lock().expect("peak maps lock");
        let elapsed = r.t_ns.saturating_sub(st.last_refill_ns) as f64;
        st.last_refill_ns = st.last_refill_ns.max(r.t_ns);
        st.tokens_ns =
            (st.tokens_ns + elapsed * self.opts.budget).min(SAVINGS_WALL_NS * self.opts.budget);
        let best_pss = st.best.as_ref().map(|b| b.tree_pss_bytes);
        if r.new_high {
            st.max_seen = r.pss_bytes;
        }
        let worth = match best_pss {
            None => r.pss_bytes > 0,
            Some(b) if r.new_high => r.pss_bytes as f64 >= b as f64 * GROWTH,
            Some(b) => {
                st.pending
                    && r.pss_bytes > b
                    && r.pss_bytes as f64 >= st.max_seen as f64 * STILL_HELD
            }
        };
        if !worth {
            return;
        }
        let chosen = choose(r.pss_by_pid, r.pss_bytes);
        let pages: u64 = chosen.iter().map(|&(_, pss)| pss / 4096).sum();
        let expected = st.ns_per_page * pages as f64 + NS_PER_PROCESS * chosen.len() as f64;
        let affordable = st.tokens_ns >= expected;
        let overdraft = !affordable && r.exit_stop.is_some() && st.tokens_ns >= 0.0;
        if !affordable && !overdraft {
            if r.new_high {
                st.info.over_budget += 1;
            }
            st.pending = true;
            return;
        }
        let mut processes = Vec::with_capacity(chosen.len());
        let mut cost = 0u64;
        let mut mapped_pss = 0u64;
        let ranges = self.opts.ranges;
        for &(pid, pss) in &chosen {
            // A process that ended since the round is left with the others.
            if let Ok(m) = st.reader.map(pid, ranges) {
                cost += m.cost_ns;
                mapped_pss += pss;
                processes.push(m);
            }
        }
        st.tokens_ns -= cost as f64;
        st.info.cpu_ns += cost;
        st.info.snapshots += 1;
        if overdraft {
            st.info.overdrafts += 1;
        }
        if pages > 0 {
            st.ns_per_page = (cost as f64 / pages as f64).max(1.0);
        }
        st.pending = false;
        st.best = Some(PeakSnapshot {
            t_ns: r.t_ns,
            tree_pss_bytes: r.pss_bytes,
            others: (r.pss_by_pid.len() - processes.len()) as u32,
            others_pss_bytes: r.pss_bytes.saturating_sub(mapped_pss),
            processes,
        });
    }
}

/// The largest processes of a round: by decreasing PSS, at most [`MAX_PROCESSES`], until they
/// cover [`COVERED`] of the total.
pub fn choose(pss_by_pid: &[(i32, u64)], total: u64) -> Vec<(i32, u64)> {
    let mut v = pss_by_pid.to_vec();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut out = Vec::new();
    let mut covered = 0u64;
    for (pid, pss) in v {
        if out.len() >= MAX_PROCESSES || (covered as f64 >= total as f64 * COVERED && covered > 0) {
            break;
        }
        covered += pss;
        out.push((pid, pss));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chooses_the_largest_until_covered() {
        let round = [(1, 10), (2, 900), (3, 50), (4, 40)];
        assert_eq!(choose(&round, 1000), vec![(2, 900), (3, 50)]);
        let many: Vec<(i32, u64)> = (0..20).map(|p| (p, 5)).collect();
        assert_eq!(choose(&many, 100).len(), MAX_PROCESSES);
        assert!(choose(&[], 0).is_empty());
    }
}
