//! `--maps-at-peak`: when the tree's PSS reaches a new high, map its largest processes
//! (smaps, and as root page flags), keep the map taken at the highest round, and hand it to
//! the recorder when the run ends.
//!
//! Owns the snapshot policy and its CPU budget. A map costs far more than a PSS round (full
//! smaps plus the page walk: ~0.1 s per resident GiB as root), so it has a token bucket of its
//! own: CPU accrues at `budget` × wall time (and may be saved up for a while, so a long hold
//! can pay for one large map), each map spends what it measurably cost. A new high is mapped
//! when it is affordable and at least 25 % above the last map (or the bucket holds four times
//! its cost); a high that could not be afforded, or was too little above the last map, is
//! mapped at a later round if still held then. At a ptrace exit stop — the last moment the exiting
//! process's memory can be seen — a new high is mapped even with too few tokens left (never
//! with the bucket already in debt); that overdraft is counted and reported. Everything spent
//! is reported, never hidden in the sampler's figures. The sampler's own rounds keep to its 1 %
//! of a core and may be seconds apart on a large tree: when a tick's estimate finds a new high
//! that the policy would map, this budget also pays for an exact round at once
//! ([`RoundObserver::round_wanted`]), so a high held for less than the sampler's gap is still
//! mapped.

use crate::bus::event::Event;
use crate::bus::sink::Sink;
use crate::model::maps::{MemoryAtPeak, PeakMapsInfo, PeakSnapshot};
use crate::source::maps::MapReader;
use crate::source::sample::{RoundInfo, RoundObserver, Sampler};
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
/// A new high is mapped at once when it is this much above the last map (so maps taken while
/// memory grows cost at most a few times the last one: a geometric series).
const GROWTH: f64 = 1.25;
/// Below that growth, a new high is still mapped when the bucket holds this many times its
/// cost.
const PLENTY: f64 = 4.0;
/// A high that was not mapped is mapped at a later round if the tree still holds this share.
const STILL_HELD: f64 = 0.97;
/// The bucket may save up this much wall time's worth of budget …
const SAVINGS_WALL_NS: f64 = 10e9;
/// … and starts with this much (the start-up allowance).
const START_WALL_NS: f64 = 1e9;
/// First guess of a map's cost per resident page (smaps, then pagemap and page flags:
/// docs/kernel-notes.md); refined after each map.
const GUESS_NS_PER_PAGE: f64 = 200.0;
/// A process costs about as much as this many resident pages more (opening and parsing
/// smaps, walking mappings).
const PAGES_PER_PROCESS: f64 = 1000.0;

pub struct PeakMaps {
    opts: PeakOptions,
    sink: Sink,
    state: Mutex<State>,
}

struct State {
    reader: MapReader,
    policy: Policy,
    best: Option<PeakSnapshot>,
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
                policy: Policy::new(opts.budget),
                best: None,
                info: PeakMapsInfo {
                    budget: opts.budget,
                    allowance_ns: (START_WALL_NS * opts.budget) as u64,
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
            peak: Box::new(MemoryAtPeak {
                snapshot: st.best.clone(),
                info: st.info.clone(),
            }),
        });
    }
}

impl RoundObserver for PeakMaps {
    fn round_wanted(&self, t_ns: u64, pss_bytes: u64) -> bool {
        let mut st = self.state.lock().expect("peak maps lock");
        let (wanted, refused) = st.policy.wants_round(t_ns, pss_bytes);
        st.info.over_budget += u64::from(refused);
        wanted
    }

    fn round_paid(&self, cost_ns: u64) {
        let mut st = self.state.lock().expect("peak maps lock");
        st.policy.round_paid(cost_ns);
        st.info.cpu_ns += cost_ns;
        st.info.rounds += 1;
    }

    fn round_done(&self, r: &RoundInfo<'_>) {
        let mut st = self.state.lock().expect("peak maps lock");
        let chosen = choose(r.pss_by_pid, r.pss_bytes);
        let pages: u64 = chosen.iter().map(|&(_, pss)| pss / 4096).sum();
        let round = Round {
            t_ns: r.t_ns,
            pss_bytes: r.pss_bytes,
            new_high: r.new_high,
            exit_stop: r.exit_stop.is_some(),
            pages,
            processes: chosen.len(),
        };
        let overdraft = match st.policy.decide(&round) {
            Decision::Wait { over_budget } => {
                st.info.over_budget += u64::from(over_budget);
                return;
            }
            Decision::Map { overdraft } => overdraft,
        };
        let mut processes = Vec::with_capacity(chosen.len());
        let mut cost = 0u64;
        let mut mapped_pss = 0u64;
        for &(pid, pss) in &chosen {
            // A process that ended since the round is left with the others.
            if let Ok(m) = st.reader.map(pid, self.opts.ranges) {
                cost += m.cost_ns;
                mapped_pss += pss;
                processes.push(m);
            }
        }
        st.policy.spent(&round, cost);
        st.info.cpu_ns += cost;
        st.info.snapshots += 1;
        st.info.overdrafts += u64::from(overdraft);
        st.best = Some(PeakSnapshot {
            t_ns: r.t_ns,
            tree_pss_bytes: r.pss_bytes,
            others: (r.pss_by_pid.len() - processes.len()) as u32,
            others_pss_bytes: r.pss_bytes.saturating_sub(mapped_pss),
            processes,
        });
    }
}

/// What the policy knows of a round.
#[derive(Debug, Clone, Copy)]
struct Round {
    t_ns: u64,
    pss_bytes: u64,
    new_high: bool,
    exit_stop: bool,
    /// Resident pages (PSS / 4 KiB) of the processes that would be mapped.
    pages: u64,
    processes: usize,
}

#[derive(Debug, PartialEq, Eq)]
enum Decision {
    Map { overdraft: bool },
    Wait { over_budget: bool },
}

/// When to map, and the token bucket that pays for it.
struct Policy {
    budget: f64,
    tokens_ns: f64,
    last_refill_ns: u64,
    ns_per_page: f64,
    /// PSS of the round last mapped.
    mapped: Option<u64>,
    max_seen: u64,
    /// A high was not mapped: map a later round that still holds it.
    pending: bool,
    /// A tick's high was refused for want of budget since the last map (counted once).
    refused: bool,
}

impl Policy {
    fn new(budget: f64) -> Policy {
        Policy {
            budget,
            tokens_ns: START_WALL_NS * budget,
            last_refill_ns: 0,
            ns_per_page: GUESS_NS_PER_PAGE,
            mapped: None,
            max_seen: 0,
            pending: false,
            refused: false,
        }
    }

    fn refill(&mut self, t_ns: u64) {
        let elapsed = t_ns.saturating_sub(self.last_refill_ns) as f64;
        self.last_refill_ns = self.last_refill_ns.max(t_ns);
        self.tokens_ns =
            (self.tokens_ns + elapsed * self.budget).min(SAVINGS_WALL_NS * self.budget);
    }

    /// A tick estimated the tree at a new high of `pss_bytes`: is an exact round (and then
    /// likely a map) worth paying for now? The same rules as a round's new high in
    /// [`Policy::decide`], on the estimate, with the round's cost on top of the map's. Also
    /// says whether the high is refused for want of budget, once until the next map (a tick
    /// finds a new high at each step of a growth).
    fn wants_round(&mut self, t_ns: u64, pss_bytes: u64) -> (bool, bool) {
        self.refill(t_ns);
        let r = Round {
            t_ns,
            pss_bytes,
            new_high: true,
            exit_stop: false,
            pages: pss_bytes / 4096,
            processes: 1,
        };
        let worth = match self.mapped {
            None => pss_bytes > 0,
            Some(m) => pss_bytes > m && self.worth_a_map(&r, m),
        };
        if !worth {
            return (false, false);
        }
        // A round reads what a map reads, and less: at most the map's cost again.
        if self.tokens_ns >= 2.0 * self.expected(&r) {
            return (true, false);
        }
        let first = !self.refused;
        self.refused = true;
        (false, first)
    }

    fn decide(&mut self, r: &Round) -> Decision {
        self.refill(r.t_ns);
        if r.new_high {
            self.max_seen = r.pss_bytes;
        }
        let wanted = match self.mapped {
            None => r.pss_bytes > 0,
            // The last moment the exiting process's memory can be seen.
            Some(m) if r.new_high && r.exit_stop => r.pss_bytes > m,
            Some(m) if r.new_high => {
                let worth = self.worth_a_map(r, m);
                if !worth {
                    self.pending = true;
                }
                worth
            }
            Some(m) => {
                self.pending
                    && r.pss_bytes > m
                    && r.pss_bytes as f64 >= self.max_seen as f64 * STILL_HELD
            }
        };
        if !wanted {
            return Decision::Wait { over_budget: false };
        }
        if self.tokens_ns >= self.expected(r) {
            return Decision::Map { overdraft: false };
        }
        if r.exit_stop && self.tokens_ns >= 0.0 {
            return Decision::Map { overdraft: true };
        }
        self.pending = true;
        Decision::Wait {
            over_budget: r.new_high,
        }
    }

    /// A new high above the last map (`mapped`) is worth a map when it has grown enough, or
    /// when the bucket has plenty to spare for it.
    fn worth_a_map(&self, r: &Round, mapped: u64) -> bool {
        r.pss_bytes as f64 >= mapped as f64 * GROWTH || self.tokens_ns >= PLENTY * self.expected(r)
    }

    /// The cost of an exact round this policy asked for, paid from its bucket.
    fn round_paid(&mut self, cost_ns: u64) {
        self.tokens_ns -= cost_ns as f64;
    }

    /// What mapping the round's chosen processes should cost.
    fn expected(&self, r: &Round) -> f64 {
        self.ns_per_page * (r.pages as f64 + PAGES_PER_PROCESS * r.processes as f64)
    }

    fn spent(&mut self, r: &Round, cost_ns: u64) {
        self.tokens_ns -= cost_ns as f64;
        let work = r.pages as f64 + PAGES_PER_PROCESS * r.processes as f64;
        if work > 0.0 {
            self.ns_per_page = (cost_ns as f64 / work).clamp(10.0, 20_000.0);
        }
        self.mapped = Some(r.pss_bytes);
        self.pending = false;
        self.refused = false;
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

    fn round(t_ms: u64, mib: u64, new_high: bool, exit_stop: bool) -> Round {
        Round {
            t_ns: t_ms * 1_000_000,
            pss_bytes: mib << 20,
            new_high,
            exit_stop,
            pages: mib * 256,
            processes: 1,
        }
    }

    #[test]
    fn maps_growth_geometrically_and_the_plateau_later() {
        // 5 % of a core: 50 ms at start, 5 ms per 100 ms of wall.
        let mut p = Policy::new(0.05);
        p.ns_per_page = 100.0;
        let map = Decision::Map { overdraft: false };
        assert_eq!(p.decide(&round(10, 10, true, false)), map);
        p.spent(&round(10, 10, true, false), 300_000);
        // 10 → 12 MiB: not 25 % more, and the bucket (0.5 ms, then 1 ms) holds less than four
        // maps (0.35 ms each): waits for a later round still holding it.
        p.tokens_ns = 500_000.0;
        assert_eq!(
            p.decide(&round(20, 12, true, false)),
            Decision::Wait { over_budget: false }
        );
        assert_eq!(p.decide(&round(30, 12, false, false)), map);
        p.spent(&round(30, 12, false, false), 400_000);
        // With budget to spare, a small new high is mapped at once.
        p.tokens_ns = 50_000_000.0;
        assert_eq!(p.decide(&round(35, 13, true, false)), map);
        p.spent(&round(35, 13, true, false), 400_000);
        // A big new high the bucket cannot pay for: counted, then mapped once affordable
        // while still held.
        p.tokens_ns = 0.0;
        assert_eq!(
            p.decide(&round(40, 1000, true, false)),
            Decision::Wait { over_budget: true }
        );
        assert_eq!(
            p.decide(&round(50, 990, false, false)),
            Decision::Wait { over_budget: false }
        );
        assert_eq!(p.decide(&round(1_000, 990, false, false)), map);
        p.spent(&round(1_000, 990, false, false), 30_000_000);
        // Memory dropped below the peak: nothing pending, nothing to map.
        assert_eq!(
            p.decide(&round(2_000, 500, false, false)),
            Decision::Wait { over_budget: false }
        );
    }

    #[test]
    fn an_exit_stop_may_overdraw_once() {
        let mut p = Policy::new(0.01);
        p.decide(&round(0, 10, true, false));
        p.spent(&round(0, 10, true, false), 100_000);
        p.tokens_ns = 1_000_000.0;
        // Far over budget, but the exiting process's memory is gone after this stop.
        assert_eq!(
            p.decide(&round(5, 1000, true, true)),
            Decision::Map { overdraft: true }
        );
        p.spent(&round(5, 1000, true, true), 200_000_000);
        // In debt: the next exit stop may not.
        assert_eq!(
            p.decide(&round(6, 2000, true, true)),
            Decision::Wait { over_budget: true }
        );
    }

    /// A tick's new high asks for a round by the rules a round's new high is mapped by, with
    /// the round's cost on top; one refused for want of budget is counted once until a map.
    #[test]
    fn a_ticks_new_high_asks_for_a_round_the_policy_would_map() {
        // 5 % of a core: 50 ms at start.
        let mut p = Policy::new(0.05);
        p.ns_per_page = 100.0;
        // Nothing mapped yet: any high is worth a round.
        assert_eq!(p.wants_round(10_000_000, 10 << 20), (true, false));
        p.spent(&round(10, 10, true, false), 300_000);
        // 10 → 12 MiB with little to spare: not worth it (a later round maps it if held).
        p.tokens_ns = 500_000.0;
        assert_eq!(p.wants_round(20_000_000, 12 << 20), (false, false));
        // 25 % above the last map and affordable: a round.
        p.tokens_ns = 10_000_000.0;
        assert_eq!(p.wants_round(30_000_000, 13 << 20), (true, false));
        // Below the last map: never.
        assert_eq!(p.wants_round(40_000_000, 9 << 20), (false, false));
        // A big high the bucket cannot pay a round and a map for: refused, counted once.
        p.tokens_ns = 0.0;
        assert_eq!(p.wants_round(50_000_000, 1000 << 20), (false, true));
        assert_eq!(p.wants_round(51_000_000, 1001 << 20), (false, false));
        // The bucket refilled (5 % of 1.5 s: 75 ms, more than twice the 26 ms a map of
        // 1 GiB is expected to cost): the round is asked for.
        assert_eq!(p.wants_round(1_551_000_000, 1001 << 20), (true, false));
        p.spent(&round(1_551, 1001, true, false), 30_000_000);
        // After a map the count starts again.
        p.tokens_ns = 0.0;
        assert_eq!(p.wants_round(1_600_000_000, 2000 << 20), (false, true));
    }

    #[test]
    fn chooses_the_largest_until_covered() {
        let round = [(1, 10), (2, 900), (3, 50), (4, 40)];
        assert_eq!(choose(&round, 1000), vec![(2, 900), (3, 50)]);
        let many: Vec<(i32, u64)> = (0..20).map(|p| (p, 5)).collect();
        assert_eq!(choose(&many, 100).len(), MAX_PROCESSES);
        assert!(choose(&[], 0).is_empty());
    }
}
