//! Writing a record while the run goes: the recorder's tap feeds the gzip stream of JSON
//! lines, and a flusher thread sync-flushes it every [`FLUSH_EVERY`] (see `mod.rs` for the
//! format). Owns nothing of reading.

use super::{FLUSH_EVERY, Header, LEVEL};
use crate::bus::event::Stamped;
use crate::report::style::Style;
use flate2::Compression;
use flate2::write::GzEncoder;
use serde::Serialize;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

/// A record being written. Events reach it through [`Recording::tap`]; [`Recording::finish`]
/// closes it.
pub struct Recording {
    shared: Arc<Shared>,
    flusher: Option<std::thread::JoinHandle<()>>,
    path: PathBuf,
}

struct Shared {
    state: Mutex<WriteState>,
    wake: Condvar,
}

struct WriteState {
    /// The compressed stream, behind a buffer (flate2 clears a 32 KiB buffer at every write it
    /// gets, so small writes straight into it cost 100× more); `None` once finished.
    out: Option<BufWriter<GzEncoder<File>>>,
    /// Events written since the last flush.
    pending: bool,
    stop: bool,
    /// The first write error; nothing is written after it.
    error: Option<io::Error>,
}

impl WriteState {
    fn write_line(&mut self, value: &impl Serialize) {
        let (None, Some(enc)) = (&self.error, &mut self.out) else {
            return;
        };
        let res = serde_json::to_writer(&mut *enc, value)
            .map_err(io::Error::other)
            .and_then(|()| enc.write_all(b"\n"));
        match res {
            Ok(()) => self.pending = true,
            Err(e) => self.error = Some(e),
        }
    }

    /// Makes everything written so far decodable: a deflate sync flush ends the current block
    /// on a byte boundary and hands it to the file, keeping the compression dictionary.
    fn flush(&mut self) {
        self.pending = false;
        if let (None, Some(enc)) = (&self.error, &mut self.out)
            && let Err(e) = enc.flush()
        {
            self.error = Some(e);
        }
    }

    /// Ends the stream with its gzip trailer.
    fn finish(&mut self) {
        if let Some(buffered) = self.out.take() {
            let res = buffered
                .into_inner()
                .map_err(|e| e.into_error())
                .and_then(|enc| enc.finish())
                .and_then(|mut f| f.flush());
            if let Err(e) = res {
                self.error.get_or_insert(e);
            }
        }
    }
}

impl Recording {
    /// Creates the record file (as an output: see `output.rs`) and writes its header.
    pub fn create(path: &Path, text_style: Style) -> io::Result<Recording> {
        let file = crate::output::create(path)?;
        let mut state = WriteState {
            out: Some(BufWriter::with_capacity(
                1 << 16,
                GzEncoder::new(file, Compression::new(LEVEL)),
            )),
            pending: false,
            stop: false,
            error: None,
        };
        state.write_line(&Header::new(text_style));
        state.flush();
        if let Some(e) = state.error.take() {
            return Err(e);
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            wake: Condvar::new(),
        });
        let me = Arc::clone(&shared);
        let flusher = std::thread::Builder::new()
            .name("ste-record".into())
            .spawn(move || {
                // Writes to a file opened before it started; a failure to drop has no report
                // to go to, and reducing one's own capabilities does not fail (capset(2)).
                let _ = crate::launch::privilege::limit(crate::launch::privilege::Role::Helper);
                me.flush_loop()
            })?;
        Ok(Recording {
            shared,
            flusher: Some(flusher),
            path: path.to_path_buf(),
        })
    }

    /// The function the recorder calls with every event it applies.
    pub fn tap(&self) -> crate::ledger::recorder::Tap {
        let shared = Arc::clone(&self.shared);
        Box::new(move |e: &Stamped| {
            shared.state.lock().expect("record lock").write_line(e);
        })
    }

    /// Closes the record; returns the first error met while writing it, if any.
    pub fn finish(mut self) -> io::Result<()> {
        self.shared.state.lock().expect("record lock").stop = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.flusher.take() {
            let _ = t.join();
        }
        let mut st = self.shared.state.lock().expect("record lock");
        st.finish();
        match st.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Shared {
    fn flush_loop(&self) {
        let mut st = self.state.lock().expect("record lock");
        loop {
            if st.stop {
                return;
            }
            let (guard, _) = self
                .wake
                .wait_timeout(st, FLUSH_EVERY)
                .expect("record lock");
            st = guard;
            if st.pending {
                st.flush();
            }
        }
    }
}
