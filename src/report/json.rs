//! The Run as JSON (`--json`): the schema is the serde form of `model::Run`, versioned by
//! `schema_version`, followed by `programs` (the by-program view, derived from the Run as the
//! text report derives it; reading the JSON back ignores it). Unknown values are `null`.
//!
//! Strings are escaped so the JSON is safe on a terminal too: serde_json escapes the C0
//! controls, and this module DEL, the C1 ones (`U+007F`–`U+009F`, CSI among them) and the
//! [`invisible`](crate::model::invisible) ones (bidirectional controls, zero-width characters)
//! as `\uXXXX`, which JSON readers decode to the same string.

use crate::model::Run;
use serde_json::ser::{Formatter, PrettyFormatter};
use std::io::{self, Write};

pub fn render(run: &Run, w: &mut dyn Write) -> io::Result<()> {
    /// The Run's fields, then the derived ones.
    #[derive(serde::Serialize)]
    struct WithDerived<'a> {
        #[serde(flatten)]
        run: &'a Run,
        programs: Vec<crate::report::programs::Program>,
    }
    let mut ser = serde_json::Serializer::with_formatter(&mut *w, NoC1(PrettyFormatter::new()));
    let out = WithDerived {
        run,
        programs: crate::report::programs::by_program(run),
    };
    serde::Serialize::serialize(&out, &mut ser).map_err(io::Error::other)?;
    writeln!(w)
}

/// One value as a line of compact JSON, escaped as the Run is (`ste monitor --json`).
pub fn to_line<T: serde::Serialize>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::new();
    let mut ser =
        serde_json::Serializer::with_formatter(&mut out, NoC1(serde_json::ser::CompactFormatter));
    value.serialize(&mut ser)?;
    Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
}

/// serde_json's layout `F`, with C1 controls and invisible characters in strings escaped.
struct NoC1<F>(F);

impl<F: Formatter> Formatter for NoC1<F> {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut rest = fragment;
        while let Some(at) =
            rest.find(|c: char| ('\u{7f}'..='\u{9f}').contains(&c) || crate::model::invisible(c))
        {
            w.write_all(&rest.as_bytes()[..at])?;
            let c = rest[at..].chars().next().unwrap_or_default();
            write!(w, "\\u{:04x}", u32::from(c))?;
            rest = &rest[at + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }

    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_in_strings_are_escaped_and_read_back() {
        let mut run =
            crate::ledger::recorder::Recorder::replay(Vec::<crate::bus::event::Stamped>::new());
        run.notes = vec!["a\u{1b}[31m\u{9b}2J\u{7}\u{7f}é\u{202e}".into()];
        let mut out = Vec::new();
        render(&run, &mut out).unwrap();
        assert!(crate::report::terminal::is_safe(&out, false));
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(r#""a\u001b[31m\u009b2J\u0007\u007fé\u202e""#),
            "{text}"
        );
        let back: Run = serde_json::from_str(&text).unwrap();
        assert_eq!(back.notes, run.notes);
    }
}
