//! What a reader keeps in the node cache: a pull over a repository in a folder of this
//! machine keeps nothing (it could read every chunk again from there), a mount and the
//! Python package keep what they read whatever the repository.

use sealvol_core::read::Fill;
use sealvol_setup::{Flags, Keep, Setup, settings::resolve};

fn setup(dir: &std::path::Path) -> Setup {
    let mut settings = resolve(Flags {
        repo: Some(dir.join("repo").display().to_string()),
        state: Some(dir.join("state")),
        ..Flags::default()
    })
    .unwrap();
    settings.cache = dir.join("cache");
    let setup = Setup::new(settings, true);
    setup.open_repo(true).unwrap();
    setup
}

#[test]
fn a_pull_over_a_folder_on_this_machine_keeps_nothing_a_mount_keeps_what_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path());
    let pull = s
        .read_tiers(&[], None, &[], Keep::FromElsewhere(Fill::Inline))
        .unwrap();
    assert!(pull.cache().is_none(), "a second copy on the same disk");
    assert!(!dir.path().join("cache").exists(), "not even made");
    let mount = s
        .read_tiers(&[], None, &[], Keep::Everything(Fill::Background))
        .unwrap();
    assert!(mount.cache().is_some());
}
