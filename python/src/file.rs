//! One file of a sealed version, read by offset: every byte proven against the
//! version's digest before Python sees it, the GIL let go while it is fetched.
//! `sealvol.File` (Python) gives it the file object's interface.
//!
//! An open file reads as a mount's reader does, through the version's filesystem core
//! (`sealvol_mount::VolumeFs`: the memory tier, read-ahead that follows the reader,
//! the read layer's one proven read), with no kernel in between; a file the node cache
//! holds whole is read from there. `tensors()` reads only the ranges it is asked for
//! (`Tiers::read_proven`), with no read-ahead.

use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sealvol_core::Error;
use sealvol_mount::VolumeFs;
use sealvol_mount::fs::{ReadData, ReadError};
use sealvol_mount::layout::Layout;

use crate::errors::raise;

/// The most one read call returns; a larger ask is served in several.
const MAX_READ: usize = 16 << 20;

/// A file as one process opened it.
pub struct Opened {
    pub fs: Arc<VolumeFs>,
    pub layout: Arc<Layout>,
    /// The handle reads stream through (read-ahead follows it); none for `tensors()`.
    pub fh: Option<u64>,
    /// The whole file, verified, in the node cache.
    pub backing: Option<std::fs::File>,
}

impl Drop for Opened {
    fn drop(&mut self) {
        if let Some(fh) = self.fh {
            self.fs.release(fh);
        }
    }
}

#[pyclass(module = "sealvol._native", frozen)]
pub struct NativeFile {
    /// The file as opened by process `pid`: a child after `fork` opens it again with
    /// `reopen` (the parent's engine threads are not in the child), from the same
    /// pinned version.
    opened: Mutex<(u32, Arc<Opened>)>,
    reopen: Reopen,
    /// The path in the version, for messages.
    #[pyo3(get)]
    pub path: String,
    #[pyo3(get)]
    pub size: u64,
}

/// How a child after `fork` opens the same file of the same pinned version again.
pub type Reopen = Box<dyn Fn(Python<'_>) -> PyResult<Opened> + Send + Sync>;

/// A failed read as the engine's error (`Errno` only for a handle that is not open).
pub fn explained(path: &str, e: ReadError) -> Error {
    match e {
        ReadError::Engine(e) => e,
        ReadError::Errno(errno) => Error::invalid(format!(
            "cannot read {path}: {}",
            std::io::Error::from_raw_os_error(errno.0)
        )),
    }
}

impl NativeFile {
    pub fn new(path: &str, opened: Opened, reopen: Reopen) -> NativeFile {
        NativeFile {
            size: opened.layout.obj.size,
            opened: Mutex::new((std::process::id(), Arc::new(opened))),
            reopen,
            path: path.to_string(),
        }
    }

    /// The file as this process opened it.
    fn here(&self, py: Python<'_>) -> PyResult<Arc<Opened>> {
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        if opened.0 != std::process::id() {
            let fresh = Arc::new((self.reopen)(py)?);
            let old = std::mem::replace(&mut *opened, (std::process::id(), fresh));
            // The parent's: its threads are not here; left alone.
            std::mem::forget(old);
        }
        Ok(Arc::clone(&opened.1))
    }

    /// Up to `n` bytes from `offset`, as a reader streaming through the file.
    fn stream(&self, o: &Opened, offset: u64, n: usize) -> sealvol_core::Result<ReadData> {
        let n = n.min(MAX_READ);
        if let Some(file) = &o.backing {
            let n = n.min(self.size.saturating_sub(offset) as usize);
            let mut out = vec![0; n];
            let mut got = 0;
            while got < n {
                match file.read_at(&mut out[got..], offset + got as u64) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let at = std::path::Path::new(&self.path);
                        return Err(Error::io("cannot read the node cache's copy of", at, e));
                    }
                }
            }
            out.truncate(got);
            return Ok(ReadData::Owned(out.into()));
        }
        match o.fh {
            Some(fh) => {
                o.fs.read_explained(fh, offset, n as u32)
                    .map_err(|e| explained(&self.path, e))
            }
            None => {
                let bytes = o.fs.tiers().read_proven(&o.layout.obj, offset, n)?;
                Ok(ReadData::Owned(bytes.into()))
            }
        }
    }
}

#[pymethods]
impl NativeFile {
    /// The tensors of a `.safetensors` file and its metadata (`Header`).
    fn safetensors_header(&self, py: Python<'_>) -> PyResult<Header> {
        let o = self.here(py)?;
        py.detach(|| self.header(&o)).map_err(raise)
    }

    /// Up to `n` bytes from `offset` (fewer at the end of the file, none past it), read
    /// as a stream: read-ahead follows.
    fn read_at<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        n: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.bytes(py, |o| self.stream(o, offset, n))
    }

    /// Up to `n` bytes from `offset`, those alone: nothing is read ahead.
    fn read_range<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        n: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let n = n.min(MAX_READ);
        self.bytes(py, |o| o.fs.tiers().read_proven(&o.layout.obj, offset, n))
    }

    /// The file descriptor of the node cache's whole, verified copy of the file, when it
    /// holds one (what a mount hands the kernel for passthrough): read with `os.preadv`
    /// straight into the caller's buffer. Valid while this object is open.
    fn backing_fd(&self, py: Python<'_>) -> PyResult<Option<i32>> {
        use std::os::fd::AsRawFd;
        Ok(self.here(py)?.backing.as_ref().map(|f| f.as_raw_fd()))
    }

    /// Lets go of the handle (a large file read whole is then kept whole in the node
    /// cache, as a mount's is on release). Reading after this is the caller's error.
    fn close(&self) {
        let opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        if let (true, Some(fh)) = (opened.0 == std::process::id(), opened.1.fh) {
            opened.1.fs.release(fh);
        }
    }
}

impl NativeFile {
    /// What `read` gives, read with the GIL let go, as Python bytes.
    fn bytes<'py, B: AsRef<[u8]> + Send>(
        &self,
        py: Python<'py>,
        read: impl FnOnce(&Opened) -> sealvol_core::Result<B> + Send,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let o = self.here(py)?;
        let bytes = py.detach(|| read(&o)).map_err(raise)?;
        Ok(PyBytes::new(py, bytes.as_ref()))
    }
}

/// The most tensors a header may name for `tensors()`: what 64 MiB of memory holds
/// (a 100 MB header can name a million one-byte tensors).
fn tensor_limit() -> usize {
    (64 << 20)
        / sealvol_core::safetensors::cost_per_tensor(sealvol_core::safetensors::Want::Details)
}

/// A `.safetensors` file's tensors (name, dtype, shape, begin, end) and its
/// `__metadata__`, read from its header with the one bounded parser every reader of
/// headers uses (`sealvol_core::safetensors`).
pub type Header = (
    Vec<(String, String, Vec<u64>, u64, u64)>,
    std::collections::BTreeMap<String, String>,
);

impl NativeFile {
    pub fn header(&self, o: &Opened) -> sealvol_core::Result<Header> {
        use sealvol_core::safetensors as st;
        let (tiers, obj) = (o.fs.tiers(), &o.layout.obj);
        let bad = |why: String| {
            Error::invalid(format!("{} is not a safetensors file: {why}", self.path))
                .hint("tensors() reads .safetensors files; open() reads any file")
        };
        let first = tiers.read_proven(obj, 0, 8)?;
        let n = st::header_len(&first, self.size).ok_or_else(|| {
            bad(format!(
                "its first 8 bytes give no header length that fits in {} bytes (at most {})",
                self.size,
                st::MAX_HEADER
            ))
        })?;
        let header = tiers.read_proven(obj, 8, n as usize)?;
        let tensors = st::parse(&header, self.size, st::Want::Details, tensor_limit())
            .map_err(|e| bad(e.to_string()))?;
        #[derive(serde::Deserialize)]
        struct Meta {
            #[serde(rename = "__metadata__", default)]
            metadata: Option<std::collections::BTreeMap<String, String>>,
        }
        let meta: Meta = serde_json::from_slice(&header).map_err(|e| bad(e.to_string()))?;
        Ok((
            tensors
                .into_iter()
                .map(|t| (t.name, t.dtype, t.shape, t.range.start, t.range.end))
                .collect(),
            meta.metadata.unwrap_or_default(),
        ))
    }
}
