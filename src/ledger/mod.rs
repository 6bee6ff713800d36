//! The ledger: the recorder (the only writer of the Run), its folds (`fold/`), the record
//! file that streams the events and replays them (`record`), and a finished Run read back from
//! a record or a `--json` file (`load`).
//!
//! Deterministic: it never reads the kernel and never formats output, so a record replays to
//! the same Run. Must not import a source's readers, `kernel`, the face or a report.

pub mod fold;
pub mod load;
pub mod record;
pub mod recorder;
