//! Where the pipeline gets a file's bytes.

use std::io::Read;

use crate::error::Result;

/// Where the pipeline gets a file's bytes: a local file, or a stream from a source.
pub trait Inputs: Sync {
    /// Opens file `i` of the listing.
    fn open(&self, i: usize) -> Result<Box<dyn Read + Send + '_>>;
    /// Names file `i` in errors.
    fn name(&self, i: usize) -> String;
    /// Called after the last byte of file `i` (`total` bytes) and before it can be
    /// sealed: an error means the file changed, or ended short, while it was read.
    fn finished(&self, i: usize, total: u64) -> Result<()>;
}
