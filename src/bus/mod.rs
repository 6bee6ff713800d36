//! The bus: the one event vocabulary every source speaks (`event`), the run's clock and the
//! channel the events travel on (`sink`), what trackers tell the sampler of the tree
//! (`tree`), the launched command as trackers get it (`launched`), the start-up phase log
//! (`phases`).
//!
//! Owns only these shared types. Must not import a source, the ledger, the face or a report:
//! everything else depends on the bus, never the other way round.

pub mod event;
pub mod launched;
pub mod mailbox;
pub mod phases;
pub mod sink;
pub mod tree;
