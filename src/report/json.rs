//! The Run as JSON (`--json`): the schema is the serde form of `model::Run`, versioned by
//! `schema_version`. Unknown values are `null`.

use crate::model::Run;
use std::io::{self, Write};

pub fn render(run: &Run, w: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, run).map_err(io::Error::other)?;
    writeln!(w)
}
