//! The samples a window of ticks holds back before they go out: the highest estimate, lower
//! and upper bound of the window's ticks, the end of a plateau, and the last tick that read the
//! processes' CPU. Part of the sampler (`mod.rs`, `tick.rs`): decides nothing about when a
//! window ends.

use crate::model::Sample;

/// The window's held samples: the highest estimate, the highest lower bound and the highest
/// upper bound of its ticks (often one sample, up to three), so that none of the figures Max
/// PSS is made of is dropped, the end of a plateau, and the last tick that read the processes'
/// CPU (at most one a second: the CPU over time must not lose it to a higher PSS).
#[derive(Default)]
pub(super) struct Held([Option<Sample>; 5]);

impl Held {
    pub(super) fn hold(&mut self, s: Sample) {
        let better = [
            |a: &Sample, b: &Sample| a.pss_bytes > b.pss_bytes,
            |a: &Sample, b: &Sample| a.low() > b.low(),
            |a: &Sample, b: &Sample| a.high() > b.high(),
        ];
        let read_cpu = s.per_process.iter().flatten().any(|p| p.cpu_ns.is_some());
        for (slot, better) in self.0.iter_mut().zip(better) {
            if slot.as_ref().is_none_or(|h| better(&s, h)) {
                *slot = Some(s.clone());
            }
        }
        if read_cpu {
            self.0[4] = Some(s);
        }
    }

    /// The last point of a plateau: kept whatever its figures.
    pub(super) fn hold_end(&mut self, s: Sample) {
        self.0[3] = Some(s);
    }

    /// The distinct samples held, in time order, the window emptied.
    pub(super) fn take(&mut self) -> Vec<Sample> {
        let mut v: Vec<Sample> = self.0.iter_mut().filter_map(Option::take).collect();
        v.sort_by_key(|s| s.t_ns);
        v.dedup_by_key(|s| s.t_ns);
        v
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProcessSample;

    /// A window keeps the last tick that read the CPU, whatever a later tick's PSS.
    #[test]
    fn a_window_keeps_its_cpu_read() {
        let at = |t_ns: u64, pss_bytes: u64, cpu_ns: Option<u64>| Sample {
            t_ns,
            pss_bytes,
            per_process: Some(vec![ProcessSample {
                pid: 1,
                pss_bytes,
                cpu_ns,
            }]),
            ..Default::default()
        };
        let mut h = Held::default();
        h.hold(at(1, 10, Some(5)));
        h.hold(at(2, 20, None));
        let kept: Vec<(u64, Option<u64>)> = h
            .take()
            .iter()
            .map(|s| (s.t_ns, s.per_process.as_ref().unwrap()[0].cpu_ns))
            .collect();
        assert_eq!(kept, [(1, Some(5)), (2, None)]);
    }
}
