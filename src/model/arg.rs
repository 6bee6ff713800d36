//! `Arg`: one argv element (or any other byte string the kernel hands us) kept byte-exact.
//!
//! Linux argv is bytes, not UTF-8. The model keeps the bytes; serde writes a JSON string when
//! they are valid UTF-8 (nearly always) and `{"bytes": [..]}` otherwise, so no byte is lost in a
//! Run or a record file. Escaping for terminals lives here too, because every text output of
//! argv must escape the same way.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt::Write as _;

#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Arg(pub Vec<u8>);

impl Arg {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Lossy text, for places that need a `str` (JSON consumers, HTML titles).
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }

    /// Printable, unambiguous form for a terminal: control bytes and invalid UTF-8 become
    /// `\xNN` (with `\n`, `\t`, `\\` spelled out), and an argument that would not survive a shell
    /// unquoted (spaces, quotes, empty) is wrapped in single quotes.
    pub fn escaped(&self) -> String {
        let out = Escaped(&self.0).to_string();
        let needs_quotes = self.0.is_empty()
            || self.0.iter().any(|b| {
                matches!(
                    b,
                    b' ' | b'\''
                        | b'"'
                        | b'`'
                        | b'$'
                        | b';'
                        | b'&'
                        | b'|'
                        | b'<'
                        | b'>'
                        | b'('
                        | b')'
                        | b'*'
                        | b'?'
                        | b'['
                        | b']'
                        | b'#'
                        | b'~'
                        | b'{'
                        | b'}'
                )
            });
        if needs_quotes {
            format!("'{}'", out.replace('\'', "'\\''"))
        } else {
            out
        }
    }
}

impl From<&str> for Arg {
    fn from(s: &str) -> Self {
        Arg(s.as_bytes().to_vec())
    }
}

impl From<Vec<u8>> for Arg {
    fn from(v: Vec<u8>) -> Self {
        Arg(v)
    }
}

impl std::fmt::Debug for Arg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

/// Characters a terminal shows as nothing, or that reorder what follows: the bidirectional
/// controls (U+202E makes `exe.txt` of `txt.exe`; U+2066–U+2069 isolate, U+200E/F and U+061C
/// mark), zero-width characters (U+200B–U+200D, the word joiner U+2060 and the invisible
/// operators after it, U+FEFF), the soft hyphen, the Mongolian vowel separator, the line and
/// paragraph separators, the deprecated format controls and the interlinear annotations.
/// Shown escaped, as control characters are, so that a name cannot pass for another.
pub fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{61c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
    )
}

/// Bytes made safe for a terminal, the way argv is in `EXEC:` lines: control characters
/// (ESC, BEL, C1 codes such as CSI), the [`invisible`] ones and invalid UTF-8 become `\xNN`
/// (each byte of the character), with `\n`, `\t` and `\\` spelled out. Every string a text
/// report takes from a traced program, /proc or a record goes through it, so no such string
/// can move the cursor, set a title, change colours or reorder the line.
#[derive(Clone, Copy)]
pub struct Escaped<'a>(pub &'a [u8]);

impl<'a> Escaped<'a> {
    pub fn str(s: &'a str) -> Escaped<'a> {
        Escaped(s.as_bytes())
    }
}

impl std::fmt::Display for Escaped<'_> {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for chunk in self.0.utf8_chunks() {
            for c in chunk.valid().chars() {
                match c {
                    '\n' => out.write_str("\\n")?,
                    '\t' => out.write_str("\\t")?,
                    '\\' => out.write_str("\\\\")?,
                    c if c.is_control() || invisible(c) => {
                        let mut buf = [0u8; 4];
                        for b in c.encode_utf8(&mut buf).bytes() {
                            write!(out, "\\x{b:02x}")?;
                        }
                    }
                    c => out.write_char(c)?,
                }
            }
            for b in chunk.invalid() {
                write!(out, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

/// An argument shown in text is escaped (without the shell quoting of [`Arg::escaped`]).
impl std::fmt::Display for Arg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Escaped(&self.0).fmt(f)
    }
}

/// The escaped argv joined by spaces: `sh -c 'echo hi'`.
pub fn join_escaped(argv: &[Arg]) -> String {
    let mut out = String::new();
    for (i, a) in argv.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&a.escaped());
    }
    out
}

impl Serialize for Arg {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(text) => s.serialize_str(text),
            Err(_) => {
                use serde::ser::SerializeStruct;
                let mut st = s.serialize_struct("Arg", 1)?;
                st.serialize_field("bytes", &self.0)?;
                st.end()
            }
        }
    }
}

/// What a deserializer says when it reads more arguments than [`bounded_args`] allows.
pub const TOO_MANY_ARGS: &str = "more arguments than ste reads";

thread_local! {
    /// How many more arguments this thread may deserialize (`None`: no bound).
    static ARGS_LEFT: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Runs `read` (a deserialization on this thread) with at most `max` arguments read: one more
/// fails it with [`TOO_MANY_ARGS`], before it is held. An argument is the one value of a Run
/// that a file can multiply cheaply (`"a",` is four bytes of JSON, and some fifty of memory
/// once read, more to render), so readers of files bound it here, where it is built. Returns
/// what `read` gave and how many arguments it read.
pub fn bounded_args<T>(max: u64, read: impl FnOnce() -> T) -> (T, u64) {
    let before = ARGS_LEFT.with(|l| l.replace(Some(max)));
    let out = read();
    let left = ARGS_LEFT.with(|l| l.replace(before)).unwrap_or(0);
    (out, max - left)
}

impl<'de> Deserialize<'de> for Arg {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let left = ARGS_LEFT.with(std::cell::Cell::get);
        if let Some(left) = left {
            if left == 0 {
                return Err(serde::de::Error::custom(TOO_MANY_ARGS));
            }
            ARGS_LEFT.with(|l| l.set(Some(left - 1)));
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Text(String),
            Bytes { bytes: Vec<u8> },
        }
        Ok(match Repr::deserialize(d)? {
            Repr::Text(t) => Arg(t.into_bytes()),
            Repr::Bytes { bytes } => Arg(bytes),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_control_and_invalid_bytes() {
        assert_eq!(Arg::from("plain").escaped(), "plain");
        assert_eq!(Arg::from("a b").escaped(), "'a b'");
        assert_eq!(Arg::from("").escaped(), "''");
        assert_eq!(Arg::from("it's").escaped(), r"'it'\''s'");
        assert_eq!(Arg(b"x\x01\n\xffy".to_vec()).escaped(), r"x\x01\n\xffy");
        assert_eq!(Arg::from("é").escaped(), "é");
        let hostile = "\x1b[31mred\x1b]0;title\x07\u{9b}2J";
        assert_eq!(
            Escaped::str(hostile).to_string(),
            r"\x1b[31mred\x1b]0;title\x07\xc2\x9b2J"
        );
        // Bidirectional controls and zero-width characters (issue 44, item 9).
        assert_eq!(
            Escaped::str("evil\u{202e}txt.exe a\u{200b}b \u{2066}x\u{2069}").to_string(),
            r"evil\xe2\x80\xaetxt.exe a\xe2\x80\x8bb \xe2\x81\xa6x\xe2\x81\xa9"
        );
        assert_eq!(
            Escaped::str("\u{feff}\u{ad}").to_string(),
            r"\xef\xbb\xbf\xc2\xad"
        );
        assert!(!invisible('é') && !invisible('\u{2065}') && !invisible(' '));
    }

    #[test]
    fn arguments_read_are_bounded() {
        let json = r#"["a","b",{"bytes":[255]},"d"]"#;
        let (ok, n) = bounded_args(4, || serde_json::from_str::<Vec<Arg>>(json));
        assert_eq!((ok.unwrap().len(), n), (4, 4));
        let (over, n) = bounded_args(3, || serde_json::from_str::<Vec<Arg>>(json));
        assert!(over.unwrap_err().to_string().starts_with(TOO_MANY_ARGS));
        assert_eq!(n, 3);
        // Unbounded outside.
        assert_eq!(serde_json::from_str::<Vec<Arg>>(json).unwrap().len(), 4);
    }

    #[test]
    fn json_round_trip_is_lossless() {
        let args = vec![Arg::from("ok"), Arg(vec![0x66, 0xff, 0x00])];
        let json = serde_json::to_string(&args).unwrap();
        assert_eq!(json, r#"["ok",{"bytes":[102,255,0]}]"#);
        let back: Vec<Arg> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, args);
    }
}
