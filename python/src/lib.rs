//! The Python package `sealvol`'s engine, `sealvol._native`: the same code the CLI runs
//! (the settings and opening of `sealvol-setup`, core's resolve, read layer, pull and
//! push), with no logic of its own beyond turning its answers into Python's. Listings
//! come back as JSON text, which `sealvol/__init__.py` makes into objects; bytes of a
//! file come back proven (`Tiers::read_proven`). Every call that waits on I/O lets go
//! of the GIL. After a `fork`, a client opens its repository again in the child: the
//! engine's threads and handles are never shared across it (`client.rs`).

mod client;
mod errors;
mod file;
mod progress;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::Client>()?;
    m.add_class::<file::NativeFile>()?;
    errors::register(m)?;
    Ok(())
}
