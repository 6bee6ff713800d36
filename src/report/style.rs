//! How the text report is laid out (its width and colours) and the widest layout there is.
//!
//! A room of its own because the text report's sections (`accounting`, `chart`, `maps`), the
//! record that keeps the layout and the command line that chooses it all take it, and the
//! text report takes those sections: here it sits below all of them.

/// The widest text layout: the widest `--width` takes, and the widest a record may state.
pub const MAX_WIDTH: usize = u16::MAX as usize;

/// How the text report is laid out. Stored in records, so `ste report` prints what the live
/// run printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Style {
    /// Columns available (the terminal's width, or 80).
    pub width: usize,
    /// ANSI colours (only on a terminal, never with `NO_COLOR`).
    pub color: bool,
    /// Whether a row longer than `width` (an argv in `--tree` and `--top`) is cut to fit: on
    /// a terminal, and with `--width` or `COLUMNS`; into a file, rows are whole and `width`
    /// is the chart's alone. Records of older versions cut theirs.
    #[serde(default = "cut_before")]
    pub fit: bool,
}

/// What records written before `Style::fit` did: every row cut to the width.
fn cut_before() -> bool {
    true
}
