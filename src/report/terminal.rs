//! The last step of every text report: a writer through which no control character reaches a
//! terminal except the line ends and ste's own colours.
//!
//! Owns that guarantee, and only it. Text reports quote strings a traced program chose
//! (argv, program names, paths), /proc gave (map paths) or a record holds (notes, sources);
//! the renderers escape the ones they know of ([`Escaped`](crate::model::Escaped)), and this
//! writer escapes whatever any line of any text report still carries, the same way: a control
//! character (C0 but `\n`, DEL, C1 such as CSI `U+009B`) and an
//! [`invisible`](crate::model::invisible) one (bidirectional controls, zero-width characters)
//! becomes `\xNN` for each of its bytes. With colours on, only the exact SGR codes ste writes
//! pass ([`COLORS`]); a string holding one can change a colour, nothing else. It never touches
//! backslashes, so text escaped before passes unchanged.

use std::io::{self, Write};

/// What to do with the bytes at the start of `rest`: `Some(n)` when they begin a character
/// of `n` bytes a terminal must not get (C1 or [`invisible`](crate::model::invisible)),
/// `None` when they begin anything else. `Err(())` when `rest` ends inside a multi-byte
/// character that may be one (it must be judged with the bytes that follow).
fn hidden(rest: &[u8]) -> Result<Option<usize>, ()> {
    let len = match rest.first() {
        Some(0xc2..=0xdf) => 2,
        Some(0xe0..=0xef) => 3,
        _ => return Ok(None),
    };
    let Some(bytes) = rest.get(..len) else {
        return Err(());
    };
    Ok(std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.chars().next())
        .filter(|&c| c.is_control() || crate::model::invisible(c))
        .map(|_| len))
}

/// The colour codes ste's text report writes (`report::text`, `report::chart`).
pub const COLORS: [&[u8]; 3] = [b"\x1b[1;32m", b"\x1b[0m", b"\x1b[36m"];

/// Wraps `inner`; [`Terminal::finish`] writes what an unfinished sequence held back.
pub struct Terminal<'a> {
    inner: &'a mut dyn Write,
    colors: bool,
    /// The end of the last write when it may be the start of a colour code or of a two-byte
    /// character, judged with the next write.
    held: Vec<u8>,
}

impl<'a> Terminal<'a> {
    pub fn new(inner: &'a mut dyn Write, colors: bool) -> Terminal<'a> {
        Terminal {
            inner,
            colors,
            held: Vec::new(),
        }
    }

    /// Writes what was held back, escaped.
    pub fn finish(mut self) -> io::Result<()> {
        let held = std::mem::take(&mut self.held);
        let mut out = Vec::with_capacity(held.len() * 4);
        self.escape(&held, true, &mut out);
        self.inner.write_all(&out)?;
        self.inner.flush()
    }

    /// Appends `buf` to `out` escaped; unless `last`, an end that may continue in the next
    /// write is held back instead.
    fn escape(&mut self, buf: &[u8], last: bool, out: &mut Vec<u8>) {
        let mut i = 0;
        while i < buf.len() {
            let b = buf[i];
            let rest = &buf[i..];
            if b == 0x1b && self.colors {
                if let Some(code) = COLORS.iter().find(|c| rest.starts_with(c)) {
                    out.extend_from_slice(code);
                    i += code.len();
                    continue;
                }
                if !last && COLORS.iter().any(|c| c.starts_with(rest)) {
                    self.held.extend_from_slice(rest);
                    return;
                }
            }
            match hidden(rest) {
                Ok(Some(n)) => {
                    for b in &rest[..n] {
                        out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
                    }
                    i += n;
                    continue;
                }
                Err(()) if !last => {
                    self.held.extend_from_slice(rest);
                    return;
                }
                _ => {}
            }
            if (b < 0x20 && b != b'\n') || b == 0x7f {
                out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
            } else {
                out.push(b);
            }
            i += 1;
        }
    }
}

impl Write for Terminal<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut joined = std::mem::take(&mut self.held);
        joined.extend_from_slice(buf);
        let mut out = Vec::with_capacity(joined.len() + 16);
        self.escape(&joined, false, &mut out);
        self.inner.write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Runs `render` with its output going through a [`Terminal`] onto `w`: how every text report
/// writes.
pub fn through(
    w: &mut dyn Write,
    colors: bool,
    render: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut t = Terminal::new(w, colors);
    render(&mut t)?;
    t.finish()
}

/// Whether `text` would reach a terminal unchanged through [`Terminal`]: no control character
/// but `\n`, and with `colors` no escape sequence but [`COLORS`].
pub fn is_safe(text: &[u8], colors: bool) -> bool {
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        if let Some(code) = COLORS.iter().find(|c| colors && rest.starts_with(c)) {
            i += code.len();
            continue;
        }
        let b = text[i];
        if (b < 0x20 && b != b'\n') || b == 0x7f || matches!(hidden(rest), Ok(Some(_))) {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(parts: &[&[u8]], colors: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut t = Terminal::new(&mut out, colors);
        for p in parts {
            t.write_all(p).unwrap();
        }
        t.finish().unwrap();
        out
    }

    #[test]
    fn control_characters_are_escaped_and_colours_kept() {
        let hostile: &[u8] = "a\x1b]0;title\x07b\x1b[31mc\u{9b}2J\td\x7f\n".as_bytes();
        let out = through(&[hostile], false);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "a\\x1b]0;title\\x07b\\x1b[31mc\\xc2\\x9b2J\\x09d\\x7f\n"
        );
        assert!(is_safe(&out, false));
        assert!(!is_safe(hostile, true));
        // ste's own colours pass only with colours on, even when split across writes.
        let ours: &[&[u8]] = &[b"\x1b[1;3", b"2mEXEC:\x1b[0m x\xc2", b"\xa0y"];
        assert_eq!(
            through(ours, true),
            "\x1b[1;32mEXEC:\x1b[0m x\u{a0}y".as_bytes()
        );
        assert_eq!(
            through(ours, false),
            "\\x1b[1;32mEXEC:\\x1b[0m x\u{a0}y".as_bytes()
        );
        // Bidirectional controls and zero-width characters, whole or split across writes
        // (issue 44, item 9).
        let bidi: &[&[u8]] = &[b"a\xe2\x80", b"\xaeb\xe2", b"\x80\x8bc\xef\xbb\xbf"];
        let out = through(bidi, false);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "a\\xe2\\x80\\xaeb\\xe2\\x80\\x8bc\\xef\\xbb\\xbf"
        );
        assert!(is_safe(&out, false));
        assert!(!is_safe("x\u{2066}y".as_bytes(), false));
        assert!(is_safe("café → ok\n".as_bytes(), false));
        // Escaped text passes unchanged: the writer can wrap another.
        let once = through(&[hostile], true);
        assert_eq!(through(&[&once], true), once);
    }
}
