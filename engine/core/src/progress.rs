//! Progress is reported through a trait so that the caller decides how it looks: the
//! CLI draws indicatif bars, the console draws gauges, tests ignore it.

pub trait Progress: Send + Sync {
    /// The work ahead: bytes and files to process.
    fn begin(&self, _phase: &str, _bytes: u64, _files: u64) {}
    /// `bytes` more processed.
    fn advance(&self, _bytes: u64) {}
    /// One more file finished.
    fn file_done(&self) {}
    /// Chunks just stored: `new` ones written, `reused` ones already in the repository.
    fn chunks(&self, _new: u64, _reused: u64) {}
    /// Everything is read; the version is being sealed.
    fn sealing(&self) {}
    /// The files about to be processed, in order; the first `kept` are already stored
    /// and will be reported done without being read.
    fn plan(&self, _files: &[(String, u64)], _kept: usize) {}
    /// A line worth keeping in the job's log.
    fn note(&self, _line: &str) {}
    fn finish(&self) {}
    /// Whether whoever follows the work wants it stopped (the Python package on
    /// Ctrl-C): a pull looks between chunks and ends with `Cancelled`, leaving what an
    /// interrupted pull leaves (no file half-written under its name).
    fn cancelled(&self) -> bool {
        false
    }
}

/// Reports nothing.
pub struct Quiet;

impl Progress for Quiet {}
