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
