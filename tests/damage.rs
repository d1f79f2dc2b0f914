//! Damage, as a disk, a partial upload or a hand edit makes it: for each kind, verify
//! names exactly the versions and files it breaks; everything else still lists, pulls
//! and pushes; a push of the same bytes seals a version that verifies; `repair` (and
//! `repair --from`) leaves a repository that verifies; and no healthy byte is lost.
//!
//! The engine's side of a truncated and a deleted pack (and of each kind below, on the
//! in-memory store) is tested in `engine/core/tests/damage.rs`, and repair under a
//! reader, beside a writer, of summaries and listings, of tags cut or pointing nowhere,
//! of stray files and of packs with a copy elsewhere in `engine/core/tests/repair_local.rs`;
//! here, what a person sees.
//!
//! Every case damages the files of a real repository the way the outside world does;
//! nothing in sealvol is mocked.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::{Env, noise, walk_files, write};
use sealvol_core::digest::Hash;
use sealvol_core::objects::{self, FileObject, PackEntry};
use serde_json::Value;

/// Two volumes: `t/base` (four files, one pack, tag prod) and `t/other` (tag prod).
struct Fixture {
    env: Env,
    base_src: PathBuf,
    base: String,
    other_src: PathBuf,
    other: String,
    /// The pack `t/base` was written to.
    base_pack: PathBuf,
}

fn fixture() -> Fixture {
    let env = Env::new();
    let other_src = env.path("other-src");
    write(&other_src.join("o.bin"), &noise(1 << 20, 70));
    write(&other_src.join("p.txt"), b"other\n");
    let other = env.push(&other_src, "t/other", &["--tag", "prod"]);
    let before: BTreeSet<PathBuf> = walk_files(&env.repo.join("packs")).into_iter().collect();
    let base_src = env.path("base-src");
    write(&base_src.join("a.bin"), &noise(3 << 20, 71));
    write(&base_src.join("b.bin"), &noise(3 << 19, 72));
    write(&base_src.join("c.txt"), b"c\n");
    write(&base_src.join("d.json"), b"{\"d\": 1}\n");
    let base = env.push(&base_src, "t/base", &["--tag", "prod"]);
    let mut new: Vec<PathBuf> = walk_files(&env.repo.join("packs"))
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(new.len(), 1, "t/base went into one pack");
    Fixture {
        base_pack: new.remove(0),
        env,
        base_src,
        base,
        other_src,
        other,
    }
}

impl Fixture {
    /// The base pack's id, as its file is named.
    fn pack_id(&self) -> String {
        self.base_pack
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string()
    }

    /// Pushes `t/base`'s folder again; its `--json` report.
    fn push_base(&self) -> Value {
        let src = self.base_src.to_str().unwrap();
        serde_json::from_str(&self.env.ok(&["volume", "push", src, "t/base", "--json"])).unwrap()
    }

    /// A pull of `r` fails with a clear error; returns it.
    fn pull_fails(&self, r: &str) -> String {
        let out = self.env.path("refused");
        self.env
            .fails(1, &["volume", "pull", r, out.to_str().unwrap()])
    }

    fn verify(&self, extra: &[&str]) -> Value {
        let mut args = vec!["volume", "verify", "--json"];
        args.extend_from_slice(extra);
        let out = self.env.run(&args);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "verify --json: {e}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_eq!(
            out.status.success(),
            v["ok"] == true,
            "exit code agrees with ok"
        );
        v
    }

    /// Version → files verify says cannot be read back (`*` for the whole version).
    fn damaged(&self, extra: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
        damaged_of(&self.verify(extra))
    }

    fn assert_verifies(&self) {
        let v = self.verify(&["--read-data"]);
        assert_eq!(v["ok"], true, "{v:#}");
    }

    /// Everything not damaged still lists and pulls, byte for byte.
    fn others_still_work(&self) {
        let ls = self.env.ok(&["volume", "ls", "--json"]);
        assert!(ls.contains("\"other\"") && ls.contains("\"base\""), "{ls}");
        self.env.ok(&["volume", "versions", "t/other"]);
        self.env.ok(&["volume", "tags", "t/other"]);
        self.pulls(&self.other, &self.other_src);
        self.pulls("t/other:prod", &self.other_src);
    }

    fn pulls(&self, r: &str, src: &Path) {
        let out = self
            .env
            .path(&format!("pull-{}", Hash::of(r.as_bytes()).hex()));
        let _ = std::fs::remove_dir_all(&out);
        self.env.ok(&["volume", "pull", r, out.to_str().unwrap()]);
        common::assert_same_tree(src, &out);
    }

    /// The files of `t/base` whose chunk lists name a copy in the base pack for which
    /// `broken` holds: what verify must report, computed from the objects themselves.
    fn expected(&self, broken: impl Fn(&PackEntry) -> bool) -> BTreeSet<String> {
        let pack_id = Hash::parse_hex(&self.pack_id()).unwrap();
        let files: Value =
            serde_json::from_str(&self.env.ok(&["volume", "files", &self.base, "--json"])).unwrap();
        let mut out = BTreeSet::new();
        for f in files["files"].as_array().unwrap() {
            let Some(hash) = f["hash"].as_str() else {
                continue;
            };
            let hash = Hash::parse_hex(hash.trim_start_matches("b3:")).unwrap();
            let obj = file_object(&self.env.repo, &hash);
            if obj
                .chunks
                .iter()
                .any(|c| obj.packs[c.pack as usize] == pack_id && broken(&c.entry))
            {
                out.insert(f["path"].as_str().unwrap().to_string());
            }
        }
        out
    }

    fn base_entries(&self) -> Vec<PackEntry> {
        let bytes = std::fs::read(self.env.repo.join("index").join(self.pack_id())).unwrap();
        objects::decode_index("index", &bytes).unwrap()
    }

    fn repair(&self, extra: &[&str]) -> (bool, Value) {
        let mut args = vec!["repair", "--json"];
        args.extend_from_slice(extra);
        let out = self.env.run(&args);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "repair --json: {e}: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.success(), v)
    }

    /// After a repair: the repository verifies, and every file not in `lost` pulls.
    fn nothing_healthy_lost(&self, lost: &BTreeSet<String>) {
        self.others_still_work();
        let damaged = self.damaged(&["--read-data"]);
        let base_lost = damaged.get(&self.base).cloned().unwrap_or_default();
        assert_eq!(&base_lost, lost, "exactly these files are still missing");
    }
}

fn damaged_of(v: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for a in v["damaged_versions"].as_array().unwrap() {
        let files: BTreeSet<String> = if a["whole"] == true {
            ["*".to_string()].into()
        } else {
            a["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap().to_string())
                .collect()
        };
        out.insert(a["version"].as_str().unwrap().to_string(), files);
    }
    out
}

/// A file's chunk list: the stored one, or for a small file (which has none, see
/// docs/FORMAT.md) the one readers make from its chunk.
fn file_object(repo: &Path, hash: &Hash) -> FileObject {
    let h = hash.hex();
    match std::fs::read(repo.join("files").join(&h[..2]).join(&h)) {
        Ok(bytes) => FileObject::decode("file", &bytes, hash).unwrap(),
        Err(_) => sealvol_core::Repository::open_local(repo, false, false)
            .unwrap()
            .small_file_anywhere(hash)
            .unwrap()
            .expect("a small file's chunk"),
    }
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn flip(path: &Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x55;
    std::fs::write(path, &b).unwrap();
}

#[test]
fn a_flipped_byte_breaks_one_file_and_a_push_heals_it() {
    let f = fixture();
    let entries = f.base_entries();
    let victim = entries[entries.len() / 2];
    flip(&f.base_pack, victim.offset + 10);
    let want = f.expected(|e| *e == victim);
    assert_eq!(want.len(), 1, "one chunk belongs to one file here");

    // verify names the pack, the chunk, and exactly that file of that version.
    let v = f.verify(&["--read-data"]);
    assert_eq!(
        damaged_of(&v),
        BTreeMap::from([(f.base.clone(), want.clone())])
    );
    let p = &v["problems"][0];
    assert!(p["object"].as_str().unwrap().starts_with("packs/"), "{p}");
    assert!(
        p["problem"].as_str().unwrap().contains(&victim.hash.hex()),
        "{p}"
    );
    assert_eq!(p["affects"][0]["tags"][0], "t/base:prod", "{p}");
    // verify REF and a plain verify (a small repository is read whole) agree.
    let one: Value =
        serde_json::from_slice(&f.env.run(&["volume", "verify", &f.base, "--json"]).stdout)
            .unwrap();
    assert_eq!(damaged_of(&one), damaged_of(&v));
    assert_eq!(f.damaged(&[]), damaged_of(&v));
    let text = String::from_utf8(f.env.run(&["volume", "verify"]).stdout).unwrap();
    assert!(
        text.contains("sealvol repair --from") && text.contains("base-src"),
        "{text}"
    );
    f.others_still_work();

    // A push of the same bytes writes a fresh copy of that chunk, and only that one.
    let push = f.push_base();
    assert_eq!(push["new_chunks"], 1, "{push}");
    assert_eq!(push["files_healed"], 1, "{push}");
    f.env.ok(&["volume", "verify", &f.base]);
    f.pulls("t/base:prod", &f.base_src);

    // The damaged pack still holds the only copy of the other chunks: repair copies
    // them out, then quarantines it.
    let (ok, r) = f.repair(&[]);
    assert!(ok, "{r:#}");
    f.assert_verifies();
    f.nothing_healthy_lost(&BTreeSet::new());
    assert!(!f.base_pack.exists());
    let kept = walk_files(&f.env.repo.join("quarantine"));
    assert!(
        kept.iter()
            .any(|p| p.ends_with(f.base_pack.file_name().unwrap())),
        "{kept:?}"
    );
}

#[test]
fn a_flipped_byte_with_no_other_copy_is_healed_by_repair_from_the_source() {
    let f = fixture();
    let entries = f.base_entries();
    let victim = entries[1];
    flip(&f.base_pack, victim.offset + 1);
    let want = f.expected(|e| *e == victim);
    // A read that fails its hash records the damage, as verify does.
    let err = f.pull_fails(&f.base);
    assert!(err.contains("fails its hash check"), "{err}");
    assert!(
        !walk_files(&f.env.repo.join("damage")).is_empty(),
        "the read wrote a damage record"
    );

    // Without a source, repair saves every healthy chunk and says what is still missing.
    let before = walk_files(&f.env.repo);
    let (dry_ok, plan) = f.repair(&["--dry-run"]);
    assert!(dry_ok, "{plan:#}");
    assert!(
        !plan["report"]["actions"].as_array().unwrap().is_empty(),
        "{plan:#}"
    );
    assert_eq!(walk_files(&f.env.repo), before, "a dry run changes nothing");
    let (ok, r) = f.repair(&[]);
    assert!(!ok, "data is still missing: {r:#}");
    assert_eq!(
        r["report"]["remaining_versions"][0]["version"],
        f.base.as_str(),
        "{r:#}"
    );
    f.nothing_healthy_lost(&want);
    let text = String::from_utf8(f.env.run(&["volume", "verify"]).stdout).unwrap();
    assert!(text.contains("repair --from"), "{text}");

    let (ok, r) = f.repair(&["--from", f.base_src.to_str().unwrap()]);
    assert!(ok, "{r:#}");
    f.assert_verifies();
    f.pulls("t/base:prod", &f.base_src);
    f.others_still_work();
}

#[test]
fn a_deleted_index_breaks_nothing_and_is_written_again() {
    let f = fixture();
    let id = f.pack_id();
    std::fs::remove_file(f.env.repo.join("index").join(&id)).unwrap();
    let out = f.env.run(&["volume", "verify"]);
    assert!(out.status.success(), "no version is broken");
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no index"));
    let (ok, r) = f.repair(&[]);
    assert!(
        ok && r["report"]["actions"][0]["action"] == "write index",
        "{r:#}"
    );
    assert!(f.env.repo.join("index").join(&id).exists());
    f.assert_verifies();
    // A damaged index is rewritten the same way, the old one kept.
    std::fs::write(f.env.repo.join("index").join(&id), b"SVINDX01 garbage").unwrap();
    let v = f.verify(&[]);
    assert!(
        damaged_of(&v).is_empty(),
        "a reader never needs the index: {v:#}"
    );
    assert!(
        v["problems"][0]["object"]
            .as_str()
            .unwrap()
            .starts_with("index/"),
        "{v:#}"
    );
    f.env
        .ok(&["volume", "push", f.other_src.to_str().unwrap(), "t/other"]);
    let (ok, _) = f.repair(&[]);
    assert!(ok);
    f.assert_verifies();
}

#[test]
fn a_cut_manifest_is_listed_as_damaged_and_takes_nothing_else_down() {
    let f = fixture();
    let hex = f.base.rsplit("b3:").next().unwrap();
    let manifest = f.env.repo.join("manifests/t/base").join(hex);
    let bytes = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, &bytes[..bytes.len() / 2]).unwrap();

    let ls: Value = serde_json::from_str(&f.env.ok(&["volume", "ls", "--json"])).unwrap();
    let base = ls["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "base")
        .unwrap()
        .clone();
    assert_eq!(base["damaged"], 1, "{ls}");
    let versions = f.env.run(&["volume", "versions", "t/base"]);
    assert!(versions.status.success());
    assert!(String::from_utf8_lossy(&versions.stdout).contains("damaged"));
    assert!(String::from_utf8_lossy(&versions.stderr).contains("warning"));
    f.others_still_work();
    let v = f.verify(&[]);
    assert_eq!(
        damaged_of(&v),
        BTreeMap::from([(f.base.clone(), set(&["*"]))])
    );
    assert_eq!(v["problems"][0]["affects"][0]["tags"][0], "t/base:prod");
    let err = f.pull_fails("t/base:prod");
    assert!(err.contains("damaged"), "{err}");

    // A push of the same bytes seals it again.
    let out = f
        .env
        .run(&["volume", "push", f.base_src.to_str().unwrap(), "t/base"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    f.assert_verifies();
    f.pulls("t/base:prod", &f.base_src);
}

#[test]
fn a_cut_manifest_is_quarantined_by_repair_and_sealed_again_from_its_source() {
    let f = fixture();
    let hex = f.base.rsplit("b3:").next().unwrap();
    let manifest = f.env.repo.join("manifests/t/base").join(hex);
    let bytes = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, &bytes[..100]).unwrap();
    let (ok, r) = f.repair(&[]);
    assert!(!ok, "the version is lost until healed: {r:#}");
    assert_eq!(
        r["report"]["remaining_versions"][0]["version"],
        f.base.as_str()
    );
    // The repository itself verifies; verify still says what was lost.
    let out = f.env.run(&["volume", "verify"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("repair --from"));
    let (ok, r) = f.repair(&["--from", f.base_src.to_str().unwrap()]);
    assert!(ok, "{r:#}");
    f.assert_verifies();
    f.pulls(&f.base, &f.base_src);
    f.others_still_work();
}

#[test]
fn a_broken_tag_is_listed_and_a_push_or_repair_sets_it_again() {
    let f = fixture();
    let tag = f.env.repo.join("tags/t/base/prod");
    std::fs::write(&tag, b"{\"tag\":").unwrap();
    let v = f.verify(&[]);
    assert!(damaged_of(&v).is_empty(), "no version is broken: {v:#}");
    assert_eq!(v["problems"][0]["object"], "tags/t/base/prod");
    assert_eq!(v["problems"][0]["affects"][0]["tags"][0], "t/base:prod");
    // Listing, tags, tag and a push with --tag prod all work.
    let ls: Value = serde_json::from_str(&f.env.ok(&["volume", "ls", "--json"])).unwrap();
    assert!(
        ls["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "base" && v["damaged"] == 1)
    );
    f.env.ok(&["volume", "versions", "t/base"]);
    let tags = f.env.ok(&["volume", "tags", "t/base"]);
    assert!(tags.contains("damaged"), "{tags}");
    f.env.ok(&["volume", "tag", &f.base, "canary"]);
    let err = f.pull_fails("t/base:prod");
    assert!(err.contains("repair"), "{err}");
    f.others_still_work();

    // Nothing to restore it from: repair quarantines it and says how to set it.
    let (ok, r) = f.repair(&[]);
    assert!(ok, "{r:#}");
    assert!(
        r["report"]["actions"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("volume tag"),
        "{r:#}"
    );
    f.assert_verifies();

    // A push with --tag sets a damaged tag again and keeps the damaged bytes.
    std::fs::write(&tag, b"{\"tag\": \"prod\", \"dig").unwrap();
    let out = f.env.run(&[
        "volume",
        "push",
        f.base_src.to_str().unwrap(),
        "t/base",
        "--tag",
        "prod",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("quarantine"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        f.env.ok(&["volume", "resolve", "t/base:prod"]).trim(),
        f.base
    );
    f.assert_verifies();
}

#[test]
fn an_empty_format_file_is_named_and_written_anew() {
    let f = fixture();
    std::fs::write(f.env.repo.join("sealvol.repo"), b"").unwrap();
    // Reading needs none of its settings: everything still lists and pulls, with a
    // warning; a push is refused until repair has written it anew.
    let ls = f.env.run(&["volume", "ls"]);
    assert!(ls.status.success());
    let warning = String::from_utf8_lossy(&ls.stderr);
    assert!(
        warning.contains("sealvol.repo is damaged") && warning.contains("repair"),
        "{warning}"
    );
    f.others_still_work();
    f.pulls(&f.base, &f.base_src);
    let err = f.env.fails(
        1,
        &["volume", "push", f.base_src.to_str().unwrap(), "t/base"],
    );
    assert!(
        err.contains("nothing can be pushed") && err.contains("sealvol repair"),
        "{err}"
    );
    let v = f.verify(&[]);
    assert_eq!(v["problems"][0]["object"], "sealvol.repo", "{v:#}");
    assert!(damaged_of(&v).is_empty());
    let (ok, r) = f.repair(&[]);
    assert!(ok, "{r:#}");
    f.assert_verifies();
    f.others_still_work();
    f.pulls(&f.base, &f.base_src);
    let push = f.push_base();
    assert_eq!(
        push["new_chunks"], 0,
        "the same chunker settings: everything deduplicates"
    );
}

#[test]
fn kill_9_during_repair_leaves_the_repository_no_worse() {
    let env = Env::new();
    let src = env.path("src");
    for i in 0..4 {
        write(&src.join(format!("s{i}.bin")), &noise(48 << 20, 200 + i));
    }
    let r = env.push(&src, "t/big", &["--tag", "prod"]);
    let packs = walk_files(&env.repo.join("packs"));
    assert!(packs.len() >= 3);
    // Damage every pack: repair must salvage nearly everything, which takes a while.
    for p in &packs {
        flip(p, 100);
    }
    let f = |args: &[&str]| -> BTreeMap<String, BTreeSet<String>> {
        let out = env.run(args);
        damaged_of(&serde_json::from_slice(&out.stdout).unwrap())
    };
    let before = f(&["volume", "verify", "--read-data", "--json"]);
    let broken_before: usize = before.values().map(|s| s.len()).sum();
    let mut landed = 0;
    for delay_ms in [40u64, 120, 300, 600, 1000] {
        let mut child = env
            .cmd()
            .args(["-q", "repair"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        if child.try_wait().unwrap().is_none() {
            landed += 1;
        }
        // SAFETY: SIGKILL to our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        let now = f(&["volume", "verify", "--read-data", "--json"]);
        let broken_now: usize = now.values().map(|s| s.len()).sum();
        assert!(
            broken_now <= broken_before,
            "worse after a kill at {delay_ms} ms: {now:?}"
        );
        for (v, files) in &now {
            assert!(
                before.get(v).is_some_and(|b| files.is_subset(b)),
                "new damage after a kill at {delay_ms} ms: {now:?}"
            );
        }
    }
    assert!(landed >= 1, "no kill landed during a repair");
    let out = env.run(&["repair", "--from", src.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    env.ok(&["volume", "verify", "--read-data"]);
    let out_dir = env.path("out");
    env.ok(&["volume", "pull", &r, out_dir.to_str().unwrap()]);
    common::assert_same_tree(&src, &out_dir);
}

#[test]
fn bad_verify_and_repair_arguments_are_refused_before_anything_is_read() {
    let f = fixture();
    for subset in [
        "0/10", "11/10", "1/0", "abc", "0%", "150%", "1/300", "1.5/2", "1/2/3",
    ] {
        let err = f
            .env
            .fails(1, &["volume", "verify", "--read-data-subset", subset]);
        assert!(
            err.contains("N/T or P%") && err.contains("hint:"),
            "{subset}: {err}"
        );
    }
    let err = f.env.fails(
        1,
        &[
            "volume",
            "verify",
            "--read-data",
            "--read-data-subset",
            "1/2",
        ],
    );
    assert!(err.contains("do not go together"), "{err}");
    let err = f
        .env
        .fails(1, &["volume", "verify", &f.base, "--read-data"]);
    assert!(err.contains("always reads every chunk"), "{err}");
    let err = f.env.fails(
        1,
        &["repair", "--from", f.env.path("nowhere").to_str().unwrap()],
    );
    assert!(err.contains("no such folder"), "{err}");
    let err = f.env.fails(1, &["volume", "verify", "t/none:prod"]);
    assert!(err.starts_with("error: no volume t/none"), "{err}");
    // A folder that holds none of the missing files heals nothing, and says so.
    flip(&f.base_pack, f.base_entries()[0].offset + 3);
    f.verify(&["--read-data"]);
    let (ok, r) = f.repair(&["--from", f.other_src.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        r["report"]["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["action"] == "heal"
                && a["detail"]
                    .as_str()
                    .unwrap()
                    .contains("none of the missing files")),
        "{r:#}"
    );
    // The listing never changed through any of it.
    f.others_still_work();
}

#[test]
fn a_sync_never_builds_on_a_damaged_chunk() {
    let f = fixture();
    let src = f.base_src.to_str().unwrap();
    let first = f.env.ok(&["-q", "volume", "sync", src, "t/synced"]);
    let entries = f.base_entries();
    flip(&f.base_pack, entries[2].offset + 5);
    f.verify(&["--read-data"]);
    // The sync's own record says these objects are stored; their chunk lists are not
    // healthy any more, so they are read again and their lists replaced.
    let again = f.env.ok(&["-q", "volume", "sync", src, "t/synced"]);
    assert_eq!(first.trim(), again.trim(), "the same version");
    f.env.ok(&["volume", "verify", again.trim()]);
    f.env.ok(&["volume", "verify", &f.base]);
    f.pulls(again.trim(), &f.base_src);
}
