//! One file of a sealed version, read by offset: every byte proven against the
//! version's digest before Python sees it (`Tiers::read_proven`), the GIL let go while
//! it is fetched. `sealvol.File` (Python) gives it the file object's interface.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sealvol_core::objects::FileObject;
use sealvol_core::read::Tiers;

use crate::errors::raise;

/// The most one read call returns; a larger ask is served in several.
const MAX_READ: usize = 64 << 20;

#[pyclass(module = "sealvol._native", frozen)]
pub struct NativeFile {
    pub tiers: Arc<Tiers>,
    pub obj: Arc<FileObject>,
    /// The path in the version, for messages.
    #[pyo3(get)]
    pub path: String,
    #[pyo3(get)]
    pub size: u64,
}

#[pymethods]
impl NativeFile {
    /// The tensors of a `.safetensors` file and its metadata (`Header`).
    fn safetensors_header(&self, py: Python<'_>) -> PyResult<Header> {
        py.detach(|| self.header()).map_err(raise)
    }

    /// Up to `n` bytes from `offset` (fewer at the end of the file, none past it).
    fn read_at<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        n: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let n = n.min(MAX_READ);
        let (tiers, obj) = (Arc::clone(&self.tiers), Arc::clone(&self.obj));
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
    pub fn header(&self) -> sealvol_core::Result<Header> {
        use sealvol_core::Error;
        use sealvol_core::safetensors as st;
        let bad = |why: String| {
            Error::invalid(format!("{} is not a safetensors file: {why}", self.path))
                .hint("tensors() reads .safetensors files; open() reads any file")
        };
        let first = self.tiers.read_proven(&self.obj, 0, 8)?;
        let n = st::header_len(&first, self.size).ok_or_else(|| {
            bad(format!(
                "its first 8 bytes give no header length that fits in {} bytes (at most {})",
                self.size,
                st::MAX_HEADER
            ))
        })?;
        let header = self.tiers.read_proven(&self.obj, 8, n as usize)?;
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
