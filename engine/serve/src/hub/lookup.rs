//! Small answers every Hub route asks: the volume a key sees (`volume_for`), a
//! query's flag, and the store's work run off the async threads (`blocking`).

use sealvol_core::error::ErrorKind;
use sealvol_core::refs::VolumeName;

use super::missing::Missing;
use crate::keys::Grant;

/// The volume `ns/vol` as the key sees it: an unknown one and one it may not see are
/// the same answer (nothing is said of another namespace).
pub fn volume_for(
    repo: &sealvol_core::Repository,
    grant: &Grant,
    ns: &str,
    vol: &str,
) -> Result<VolumeName, Missing> {
    let id = format!("{ns:.100}/{vol:.100}");
    let unknown = || Missing::Repo(format!("Repository Not Found for url: {id}"));
    let name = VolumeName::parse(&format!("{ns}/{vol}")).map_err(|_| unknown())?;
    if !grant.sees(name.namespace.as_str()) {
        return Err(unknown());
    }
    match repo.require_volume(&name) {
        Ok(()) => Ok(name),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(unknown()),
        Err(e) => Err(Missing::Failed(e.to_string())),
    }
}

/// A query's flag: `true`, `True` or `1`.
pub fn flag(query: &str, name: &str) -> bool {
    form_urlencoded::parse(query.as_bytes())
        .any(|(k, v)| k == name && matches!(&*v, "true" | "True" | "1"))
}

/// Runs `f` off the async threads; a panic in it is a failure, not a lost answer.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Missing> + Send + 'static,
) -> Result<T, Missing> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|_| Err(Missing::Failed("the server failed to answer".into())))
}
