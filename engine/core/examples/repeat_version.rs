//! Bench helper: seals a large logical volume cheaply from repeated content.
//!
//!   repeat_version REPO NS/NAME@DIGEST COPIES NS/BIG [VARIANT]
//!
//! Writes a version of NS/BIG whose files are COPIES copies of the source version's
//! files (under `copy0000/`, `copy0001/`, …; with VARIANT, `v<VARIANT>-copy0000/`, …,
//! so that each variant is another version of the same size). The copies share chunk lists, so the new
//! version costs one manifest; it is exactly what a push of that repeated tree would
//! seal. `bench/mount.py` uses it to show that mounting 1 TiB is as fast as 1 GiB.

use sealvol_core::digest::Entry;
use sealvol_core::{Ref, Repository, VolumeName};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if !(5..=6).contains(&args.len()) {
        return Err("usage: repeat_version REPO NS/NAME@DIGEST COPIES NS/BIG [VARIANT]".into());
    }
    let stem = match args.get(5) {
        Some(v) => format!("v{v}-copy"),
        None => "copy".to_string(),
    };
    let repo = Repository::open_local(std::path::Path::new(&args[1]), false, false)?;
    let r = Ref::parse(&args[2])?;
    let digest = repo.resolve(&r)?;
    let copies: usize = args[3].parse()?;
    let big = VolumeName::parse(&args[4])?;
    let src = repo.manifest(&r.volume, &digest)?;
    let mut entries = Vec::with_capacity(src.entries.len() * copies);
    for i in 0..copies {
        for e in &src.entries {
            let path = format!("{stem}{i:04}/{}", e.path());
            entries.push(match e.clone() {
                Entry::File {
                    size, hash, exec, ..
                } => Entry::File {
                    path,
                    size,
                    hash,
                    exec,
                },
                Entry::Symlink { target, .. } => Entry::Symlink { path, target },
                Entry::Dir { .. } => Entry::Dir { path },
            });
        }
    }
    entries.sort_by(|a, b| a.path().cmp(b.path()));
    let mut stats = src.stats;
    stats.bytes *= copies as u64;
    stats.files *= copies as u64;
    stats.chunks *= copies as u64;
    stats.new_bytes = 0;
    stats.new_chunks = 0;
    // Small files have no chunk lists: the copies name the source's small packs, as a
    // push of the repeated tree would.
    let small_packs: Vec<sealvol_core::objects::PackId> = src
        .small_packs
        .iter()
        .filter_map(|p| sealvol_core::digest::Hash::parse_hex(p))
        .collect();
    let digest = repo
        .seal_small(
            &big,
            &[],
            entries,
            stats,
            src.provenance.clone(),
            None,
            &small_packs,
        )?
        .digest;
    println!("vol:{big}@{digest}");
    Ok(())
}
