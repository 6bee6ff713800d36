//! The recorder's folds: pure functions from events to parts of the Run, called by
//! `ledger::recorder` (accounting and its derived figures in `account`, the time breakdown in
//! `time`, per-image system call counts in `images`). Deterministic like the recorder; they
//! read only the Run and events.

pub mod account;
pub mod images;
mod time;
