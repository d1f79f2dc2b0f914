//! The engine's errors as Python exceptions, with the CLI's words: `sealvol.Error`
//! (`.hint`: what to do, or None) and one subclass per kind a caller handles apart.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use sealvol_core::error::ErrorKind;

create_exception!(
    sealvol,
    Error,
    PyException,
    "Anything sealvol refused or could not do; `.hint` says what to do (or is None)."
);
create_exception!(
    sealvol,
    NotFound,
    Error,
    "No such volume, version, tag or file (the message suggests the nearest name)."
);
create_exception!(
    sealvol,
    Damaged,
    Error,
    "Stored data failed its checks: no wrong byte is ever returned."
);
create_exception!(
    sealvol,
    PermissionDenied,
    Error,
    "The API key (or the source's credentials) may not do this."
);
create_exception!(
    sealvol,
    Untrusted,
    Error,
    "The trust policy refuses the version: no valid signature by a key it trusts."
);
create_exception!(
    sealvol,
    Timeout,
    Error,
    "A repository, server or peer did not answer in time, or could not be reached."
);
create_exception!(
    sealvol,
    InvalidRef,
    Error,
    "A ref, volume name, tag or path that is not one."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("NotFound", py.get_type::<NotFound>())?;
    m.add("Damaged", py.get_type::<Damaged>())?;
    m.add("PermissionDenied", py.get_type::<PermissionDenied>())?;
    m.add("Untrusted", py.get_type::<Untrusted>())?;
    m.add("Timeout", py.get_type::<Timeout>())?;
    m.add("InvalidRef", py.get_type::<InvalidRef>())?;
    Ok(())
}

/// An engine error as the exception a caller catches, its hint on `.hint`.
pub fn raise(e: sealvol_core::Error) -> PyErr {
    let message = e.to_string();
    let err = match e.kind() {
        ErrorKind::NotFound => NotFound::new_err(message),
        ErrorKind::Corrupt | ErrorKind::Format => Damaged::new_err(message),
        ErrorKind::Denied => PermissionDenied::new_err(message),
        ErrorKind::Untrusted => Untrusted::new_err(message),
        ErrorKind::Unavailable => Timeout::new_err(message),
        _ => Error::new_err(message),
    };
    with_hint(err, e.hint_text())
}

/// A malformed ref, name or path.
pub fn invalid(e: sealvol_core::Error) -> PyErr {
    let message = e.to_string();
    with_hint(InvalidRef::new_err(message), e.hint_text())
}

fn with_hint(err: PyErr, hint: Option<&str>) -> PyErr {
    Python::attach(|py| {
        let _ = err.value(py).setattr("hint", hint);
    });
    err
}
