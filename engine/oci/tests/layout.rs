//! A sealed version exported as a ModelPack artifact into an OCI image layout, on the
//! in-memory store: the same version gives the same manifest digest every time and in
//! any layout; each file is a layer with its bytes, path and mode; links to files are
//! their files, links to folders and empty versions are refused; a blob already in the
//! layout is kept only if its bytes hash to its name; a folder that is no layout, or an
//! index that is no index, is refused, and other images in an index are kept. (skopeo
//! reading the layout, and the config against the spec's schema: python/tests.)

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::Tiers;
use sealvol_core::refs::VolumeName;
use sealvol_core::store::MemoryStore;
use sealvol_core::testutil::folder;
use sealvol_core::{Digest, Repository};
use sealvol_oci::{export, media};

fn repository() -> Arc<Repository> {
    let mem = Arc::new(MemoryStore::new().unwrap());
    Arc::new(Repository::open(Box::new(mem), "memory".into(), true).unwrap())
}

fn vol() -> VolumeName {
    VolumeName::parse("weights/m").unwrap()
}

fn push_dir(repo: &Repository, dir: &Path) -> Digest {
    push(repo, dir, &vol(), &[], &PushOptions::new(&Quiet))
        .unwrap()
        .digest
}

fn model(root: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(root.join("model/sub")).unwrap();
    let big: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    folder(
        root,
        "model",
        &[
            ("config.json", b"{\"a\":1}".to_vec()),
            ("model.safetensors", big),
            ("README.md", b"# m\n".to_vec()),
            ("sub/run.sh", b"#!/bin/sh\n".to_vec()),
            ("same.json", b"{\"a\":1}".to_vec()),
        ],
    )
}

fn export_to(
    repo: &Arc<Repository>,
    digest: &Digest,
    dir: &Path,
    name: Option<&str>,
) -> (sealvol_oci::Artifact, sealvol_oci::layout::Written) {
    let m = repo.manifest(&vol(), digest).unwrap();
    let art = export::artifact_of(repo, &vol(), digest, &m).unwrap();
    let tiers = Tiers::new(Arc::clone(repo), None);
    let w = export::to_layout(&tiers, &m, &art, dir, name).unwrap();
    (art, w)
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn blob(dir: &Path, digest: &str) -> Vec<u8> {
    std::fs::read(
        dir.join("blobs/sha256")
            .join(digest.strip_prefix("sha256:").unwrap()),
    )
    .unwrap()
}

#[test]
fn a_version_is_one_layer_per_file_with_its_bytes_path_and_kind_the_same_every_time() {
    let t = tempfile::tempdir().unwrap();
    let src = model(t.path());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            src.join("sub/run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    let repo = repository();
    let digest = push_dir(&repo, &src);
    let out = t.path().join("layout");
    let (art, w) = export_to(&repo, &digest, &out, Some("v1"));
    // Five files, four distinct blobs (two files share bytes), plus config and manifest.
    assert_eq!(art.layers.len(), 5);
    assert_eq!((w.blobs, w.kept), (6, 0));

    let index = json(&out.join("index.json"));
    assert_eq!(
        index["manifests"][0]["digest"],
        art.manifest_digest.as_str()
    );
    assert_eq!(
        index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
        "v1"
    );
    assert_eq!(json(&out.join("oci-layout"))["imageLayoutVersion"], "1.0.0");
    let manifest = json(&out.join("blobs/sha256").join(&art.manifest_digest[7..]));
    assert_eq!(manifest["artifactType"], media::MODEL_MANIFEST);
    assert_eq!(manifest["config"]["mediaType"], media::MODEL_CONFIG);
    assert_eq!(
        manifest["annotations"]["io.sealvol.ref"],
        format!("vol:weights/m@{digest}")
    );
    let mut kinds = BTreeMap::new();
    for l in manifest["layers"].as_array().unwrap() {
        let path = l["annotations"][media::FILEPATH]
            .as_str()
            .unwrap()
            .to_string();
        let bytes = blob(&out, l["digest"].as_str().unwrap());
        assert_eq!(bytes, std::fs::read(src.join(&path)).unwrap(), "{path}");
        assert_eq!(l["size"], bytes.len() as u64);
        let meta: serde_json::Value =
            serde_json::from_str(l["annotations"][media::FILE_METADATA].as_str().unwrap()).unwrap();
        let mode = if path == "sub/run.sh" { 0o755 } else { 0o644 };
        assert_eq!(meta["mode"], mode, "{path}");
        kinds.insert(path, l["mediaType"].as_str().unwrap().to_string());
    }
    assert_eq!(kinds["model.safetensors"], media::WEIGHT);
    assert_eq!(kinds["config.json"], media::WEIGHT_CONFIG);
    assert_eq!(kinds["README.md"], media::DOC);
    assert_eq!(kinds["sub/run.sh"], media::CODE);
    let config = json(&out.join("blobs/sha256").join(&art.config_digest[7..]));
    assert_eq!(config["descriptor"]["name"], "weights/m");
    assert_eq!(config["descriptor"]["revision"], digest.to_string());
    assert_eq!(config["modelfs"]["diffIds"].as_array().unwrap().len(), 5);
    assert_eq!(config["config"]["format"], "safetensors");

    // Again, into another layout, and into the same one: the same digest, nothing
    // written twice.
    let (again, w2) = export_to(&repo, &digest, &t.path().join("other"), None);
    assert_eq!(again.manifest_digest, art.manifest_digest);
    assert_eq!(again.manifest, art.manifest);
    assert_eq!(w2.blobs, 6);
    let (_, w3) = export_to(&repo, &digest, &out, Some("v1"));
    assert_eq!((w3.blobs, w3.kept), (0, 4));
    assert_eq!(
        json(&out.join("index.json"))["manifests"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_blob_in_the_layout_is_kept_only_if_its_bytes_hash_to_its_name() {
    let t = tempfile::tempdir().unwrap();
    let repo = repository();
    let digest = push_dir(&repo, &model(t.path()));
    let out = t.path().join("layout");
    let (art, _) = export_to(&repo, &digest, &out, Some("a"));
    let weights = art
        .layers
        .iter()
        .find(|l| l.path == "model.safetensors")
        .unwrap();
    let path = out.join("blobs/sha256").join(&weights.digest[7..]);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[1000] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let (_, w) = export_to(&repo, &digest, &out, Some("b"));
    assert_eq!(
        (w.blobs, w.kept),
        (1, 3),
        "the damaged blob is written again"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        std::fs::read(t.path().join("model/model.safetensors")).unwrap()
    );
    // Both names are in the index.
    let index = json(&out.join("index.json"));
    let names: Vec<&str> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["annotations"]["org.opencontainers.image.ref.name"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(names, ["a", "b"]);
    // No temporary file left.
    let left: Vec<_> = std::fs::read_dir(out.join("blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_folder_that_is_no_layout_and_an_index_that_is_no_index_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let repo = repository();
    let digest = push_dir(&repo, &model(t.path()));
    let m = repo.manifest(&vol(), &digest).unwrap();
    let art = export::artifact_of(&repo, &vol(), &digest, &m).unwrap();
    let tiers = Tiers::new(Arc::clone(&repo), None);
    let out = t.path().join("x");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("oci-layout"), b"{\"imageLayoutVersion\":\"9\"}").unwrap();
    let e = export::to_layout(&tiers, &m, &art, &out, None).unwrap_err();
    assert!(e.to_string().contains("not an OCI image layout"), "{e}");
    std::fs::write(
        out.join("oci-layout"),
        b"{\"imageLayoutVersion\":\"1.0.0\"}",
    )
    .unwrap();
    std::fs::write(out.join("index.json"), b"[1,2]").unwrap();
    let e = export::to_layout(&tiers, &m, &art, &out, None).unwrap_err();
    assert!(e.to_string().contains("not an OCI image index"), "{e}");
}

#[test]
fn links_to_files_are_their_files_and_links_to_folders_or_nothing_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let repo = repository();
    let src = model(t.path());
    std::os::unix::fs::symlink("config.json", src.join("link.json")).unwrap();
    let digest = push_dir(&repo, &src);
    let (art, _) = export_to(&repo, &digest, &t.path().join("l"), None);
    let link = art.layers.iter().find(|l| l.path == "link.json").unwrap();
    let config = art.layers.iter().find(|l| l.path == "config.json").unwrap();
    assert_eq!(link.digest, config.digest);

    std::os::unix::fs::symlink("sub", src.join("dirlink")).unwrap();
    let digest = push_dir(&repo, &src);
    let m = repo.manifest(&vol(), &digest).unwrap();
    let e = export::artifact_of(&repo, &vol(), &digest, &m).unwrap_err();
    assert!(e.to_string().contains("dirlink"), "{e}");

    let empty = t.path().join("empty");
    std::fs::create_dir_all(empty.join("nothing")).unwrap();
    let digest = push_dir(&repo, &empty);
    let m = repo.manifest(&vol(), &digest).unwrap();
    let e = export::artifact_of(&repo, &vol(), &digest, &m).unwrap_err();
    assert!(e.to_string().contains("holds no files"), "{e}");
}

#[test]
fn an_image_is_found_by_name_or_as_the_only_one_and_its_manifest_checked() {
    use sealvol_oci::layout::find;
    let t = tempfile::tempdir().unwrap();
    let repo = repository();
    let digest = push_dir(&repo, &model(t.path()));
    let dir = t.path().join("layout");
    let (art, _) = export_to(&repo, &digest, &dir, Some("v1"));
    let found = find(&dir, Some("v1")).unwrap();
    assert_eq!(found.digest, art.manifest_digest);
    assert_eq!(found.manifest, art.manifest);
    assert_eq!(find(&dir, None).unwrap().digest, art.manifest_digest);
    let e = find(&dir, Some("v2")).unwrap_err();
    assert!(e.to_string().contains("no image named v2"), "{e}");
    assert!(e.hint_text().unwrap().contains("v1"), "{e:?}");

    // Two images: one must be named.
    let other = push_dir(
        &repo,
        &folder(t.path(), "other", &[("a.json", b"{}".to_vec())]),
    );
    export_to(&repo, &other, &dir, Some("v2"));
    let e = find(&dir, None).unwrap_err();
    assert!(e.to_string().contains("holds 2 images"), "{e}");
    assert!(e.hint_text().unwrap().contains("v1, v2"), "{e:?}");

    // A manifest whose bytes are not its digest's is damage, said as such.
    let path = sealvol_oci::layout::blob(&dir, &art.manifest_digest).unwrap();
    let mut b = std::fs::read(&path).unwrap();
    b[10] ^= 1;
    std::fs::write(&path, b).unwrap();
    let e = find(&dir, Some("v1")).unwrap_err();
    assert_eq!(e.kind(), sealvol_core::error::ErrorKind::Corrupt, "{e}");

    // Not a layout at all, an index that is no index, a descriptor naming no blob.
    let e = find(t.path(), None).unwrap_err();
    assert!(e.to_string().contains("not an OCI image layout"), "{e}");
    std::fs::write(dir.join("index.json"), b"[]").unwrap();
    assert!(find(&dir, None).is_err());
    std::fs::write(
        dir.join("index.json"),
        br#"{"schemaVersion":2,"manifests":[{"digest":"sha256:../../etc/passwd","size":1}]}"#,
    )
    .unwrap();
    let e = find(&dir, None).unwrap_err();
    assert!(e.to_string().contains("not a sha256 digest"), "{e}");
}
