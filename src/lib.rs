//! ste, the space-time explorer: runs a command and shows where its time and memory went.
//!
//! The flow (see docs/DESIGN.md): `launch` starts the command, `track` and `sample`
//! emit `event`s into one channel (`sink`), the `recorder` folds them into a `model::Run`, and
//! `report` renders the Run. `session` wires one run together.

pub mod account;
pub mod cli;
pub mod compare;
pub mod event;
pub mod export;
pub mod kernel;
pub mod launch;
pub mod malloc;
pub mod maps;
pub mod model;
pub mod options;
pub mod output;
pub mod phases;
pub mod privilege;
pub mod record;
pub mod recorder;
pub mod replay;
pub mod report;
pub mod sample;
pub mod session;
pub mod signals;
pub mod sink;
pub mod syscalls;
pub mod track;
pub mod units;
