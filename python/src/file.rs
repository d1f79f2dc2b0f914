//! One file of a sealed version, read by offset: every byte proven against the
//! version's digest before Python sees it (`Tiers::read_proven`), the GIL let go while
//! it is fetched. `sealvol.File` (Python) gives it the file object's interface.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sealvol_core::objects::FileObject;
use sealvol_core::read::Tiers;

use crate::errors::raise;

/// The most one read call returns; a larger ask is served in several.
const MAX_READ: usize = 64 << 20;

#[pyclass(module = "sealvol._native", frozen)]
pub struct NativeFile {
    /// The read path and the file's chunk list, as opened by process `pid`: a child
    /// after `fork` opens them again with `reopen` (the parent's engine threads are
    /// not in the child), from the same pinned version.
    opened: Mutex<(u32, Arc<Tiers>, Arc<FileObject>)>,
    reopen: Reopen,
    /// The path in the version, for messages.
    #[pyo3(get)]
    pub path: String,
    #[pyo3(get)]
    pub size: u64,
}

/// How a child after `fork` opens the same file of the same pinned version again.
pub type Reopen = Box<dyn Fn(Python<'_>) -> PyResult<(Arc<Tiers>, FileObject)> + Send + Sync>;

impl NativeFile {
    pub fn new(path: &str, tiers: Arc<Tiers>, obj: FileObject, reopen: Reopen) -> NativeFile {
        NativeFile {
            size: obj.size,
            opened: Mutex::new((std::process::id(), tiers, Arc::new(obj))),
            reopen,
            path: path.to_string(),
        }
    }

    /// The read path and chunk list for this process.
    fn here(&self, py: Python<'_>) -> PyResult<(Arc<Tiers>, Arc<FileObject>)> {
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        if opened.0 != std::process::id() {
            let (tiers, obj) = (self.reopen)(py)?;
            let old = std::mem::replace(&mut *opened, (std::process::id(), tiers, Arc::new(obj)));
            // The parent's: its threads are not here; left alone.
            std::mem::forget(old);
        }
        Ok((Arc::clone(&opened.1), Arc::clone(&opened.2)))
    }
}

#[pymethods]
impl NativeFile {
    /// The tensors of a `.safetensors` file and its metadata (`Header`).
    fn safetensors_header(&self, py: Python<'_>) -> PyResult<Header> {
        let (tiers, obj) = self.here(py)?;
        py.detach(|| self.header(&tiers, &obj)).map_err(raise)
    }

    /// Up to `n` bytes from `offset` (fewer at the end of the file, none past it).
    fn read_at<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        n: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let n = n.min(MAX_READ);
        let (tiers, obj) = self.here(py)?;
        let bytes = py
            .detach(move || tiers.read_proven(&obj, offset, n))
            .map_err(raise)?;
        Ok(PyBytes::new(py, &bytes))
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
    pub fn header(&self, tiers: &Tiers, obj: &FileObject) -> sealvol_core::Result<Header> {
        use sealvol_core::Error;
        use sealvol_core::safetensors as st;
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
