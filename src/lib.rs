//! ste, the space-time explorer: runs a command and shows where its time and memory went.
//!
//! The folders are the pipeline (docs/DESIGN.md draws the map): the face (`cli`, `command`)
//! parses and dispatches; `launch` starts the command; the `source`s (trackers, sampler,
//! accounts, system calls, malloc, page maps) read the kernel and emit events onto the `bus`;
//! the `ledger` folds them into a `model::Run` (and records them); `report` renders the Run.
//! `kernel` holds the readers every source shares; `units`, `output` and `export` serve the face.

pub mod bus;
pub mod cli;
pub mod command;
pub mod compare;
pub mod export;
pub mod kernel;
pub mod launch;
pub mod ledger;
pub mod model;
pub mod output;
pub mod report;
pub mod source;
pub mod units;
