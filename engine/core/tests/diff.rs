//! Diffs between real pushed versions: files, chunk spans, and safetensors tensors,
//! including the hard case of a tensor inserted mid-file (every later byte shifts).

use std::path::Path;

use sealvol_core::diff::{Status, diff};
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::VolumeName;
use sealvol_core::{Digest, Repository};

fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn safetensors(tensors: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut header = String::from("{");
    let mut offset = 0;
    for (name, data) in tensors {
        header.push_str(&format!(
            "\"{name}\":{{\"dtype\":\"BF16\",\"shape\":[{}],\"data_offsets\":[{offset},{}]}},",
            data.len() / 2,
            offset + data.len()
        ));
        offset += data.len();
    }
    header.push_str("\"__metadata__\":{\"format\":\"pt\"}}");
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    for (_, d) in tensors {
        out.extend_from_slice(d);
    }
    out
}

fn push_dir(repo: &Repository, dir: &Path, files: &[(&str, Vec<u8>)]) -> Digest {
    std::fs::create_dir_all(dir).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let vol = VolumeName::parse("weights/t").unwrap();
    let opts = PushOptions::new(&Quiet);
    push(repo, dir, &vol, &[], &opts).unwrap().digest
}

#[test]
fn files_chunks_and_tensors() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repository::open_local(&tmp.path().join("repo"), true, false).unwrap();
    let names: Vec<String> = (0..8).map(|i| format!("layers.{i}.weight")).collect();
    let v1_tensors: Vec<(&str, Vec<u8>)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), noise(300_000, i as u64 + 1)))
        .collect();
    let mut v2_tensors = v1_tensors.clone();
    v2_tensors[6].1 = noise(300_000, 99);
    let mut v3_tensors = v2_tensors.clone();
    v3_tensors.insert(4, ("lora.extra", noise(131_072, 7)));

    let v1 = push_dir(
        &repo,
        &tmp.path().join("v1"),
        &[
            ("model.safetensors", safetensors(&v1_tensors)),
            ("config.json", b"{\"layers\": 8}".to_vec()),
            ("tokenizer.json", b"{}".to_vec()),
            ("fake.safetensors", noise(5000, 3)),
        ],
    );
    let v2 = push_dir(
        &repo,
        &tmp.path().join("v2"),
        &[
            ("model.safetensors", safetensors(&v2_tensors)),
            ("config.json", b"{\"layers\": 8, \"tuned\": true}".to_vec()),
            ("notes.md", b"fine-tuned".to_vec()),
            ("fake.safetensors", noise(5000, 4)),
        ],
    );
    let v3 = push_dir(
        &repo,
        &tmp.path().join("v3"),
        &[
            ("model.safetensors", safetensors(&v3_tensors)),
            ("config.json", b"{\"layers\": 8, \"tuned\": true}".to_vec()),
            ("notes.md", b"fine-tuned".to_vec()),
            ("fake.safetensors", noise(5000, 4)),
        ],
    );
    let vol = VolumeName::parse("weights/t").unwrap();

    let d = diff(&repo, (&vol, &v1), (&vol, &v2)).unwrap();
    let status = |p: &str| d.files.iter().find(|f| f.path == p).unwrap().status;
    assert_eq!(status("config.json"), Status::Modified);
    assert_eq!(status("tokenizer.json"), Status::Removed);
    assert_eq!(status("notes.md"), Status::Added);
    assert_eq!(
        (d.totals.added, d.totals.removed, d.totals.modified),
        (1, 1, 3)
    );

    let model = d
        .files
        .iter()
        .find(|f| f.path == "model.safetensors")
        .unwrap();
    let tensors = model.tensors.as_ref().unwrap();
    let changed: Vec<&str> = tensors
        .iter()
        .filter(|t| t.status != Status::Unchanged)
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(changed, ["layers.6.weight"]);
    // The changed chunks lie where layer 6 lies, and cover about its size.
    let header = 8 + u64::from_le_bytes(safetensors(&v2_tensors)[..8].try_into().unwrap());
    let (t6_start, t6_end) = (header + 6 * 300_000, header + 7 * 300_000);
    for s in model.spans.iter().filter(|s| s.changed) {
        assert!(
            s.offset < t6_end && s.offset + s.len as u64 > t6_start,
            "{s:?}"
        );
    }
    assert!(model.changed_bytes >= 300_000 && model.changed_bytes < 300_000 + 2 * (512 << 10));
    assert!(model.spans.iter().map(|s| s.len as u64).sum::<u64>() == model.size_to.unwrap());

    let fake = d
        .files
        .iter()
        .find(|f| f.path == "fake.safetensors")
        .unwrap();
    assert!(fake.tensors.is_none());
    assert!(
        fake.tensor_note.as_deref().unwrap().contains("safetensors"),
        "{fake:?}"
    );

    // An inserted tensor shifts every later byte, and the header grows: only the new
    // tensor is reported, though chunks around it and the header are new.
    let d = diff(&repo, (&vol, &v2), (&vol, &v3)).unwrap();
    let model = d
        .files
        .iter()
        .find(|f| f.path == "model.safetensors")
        .unwrap();
    let tensors = model.tensors.as_ref().unwrap();
    let not_same: Vec<(&str, Status)> = tensors
        .iter()
        .filter(|t| t.status != Status::Unchanged)
        .map(|t| (t.name.as_str(), t.status))
        .collect();
    assert_eq!(not_same, [("lora.extra", Status::Added)]);
    assert!(
        model.changed_chunks >= 2,
        "the header and the insertion point are new chunks"
    );
    assert_eq!(
        tensors.iter().map(|t| t.name.as_str()).nth(4),
        Some("lora.extra"),
        "file order"
    );
    assert_eq!(d.totals.unchanged, 3);
}

/// A `.safetensors` file added (or removed) whole lists its tensors too, in file order.
#[test]
fn an_added_or_removed_safetensors_file_lists_its_tensors() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repository::open_local(&tmp.path().join("repo"), true, false).unwrap();
    let base = push_dir(
        &repo,
        &tmp.path().join("v1"),
        &[("config.json", b"{}".to_vec())],
    );
    let adapter = safetensors(&[("lora.b", noise(4096, 1)), ("lora.a", noise(2048, 2))]);
    let with = push_dir(
        &repo,
        &tmp.path().join("v2"),
        &[
            ("config.json", b"{}".to_vec()),
            ("adapter.safetensors", adapter),
        ],
    );
    let vol = VolumeName::parse("weights/t").unwrap();
    for (from, to, status) in [
        (&base, &with, Status::Added),
        (&with, &base, Status::Removed),
    ] {
        let d = diff(&repo, (&vol, from), (&vol, to)).unwrap();
        let f = d
            .files
            .iter()
            .find(|f| f.path == "adapter.safetensors")
            .unwrap();
        assert_eq!(f.status, status);
        let tensors = f.tensors.as_ref().expect("tensors listed");
        let listed: Vec<(&str, Status, u64)> = tensors
            .iter()
            .map(|t| (t.name.as_str(), t.status, t.bytes))
            .collect();
        assert_eq!(listed, [("lora.b", status, 4096), ("lora.a", status, 2048)]);
    }
}

/// A header whose offsets wrap around u64 is not a 16384 PiB tensor, nor a valid
/// small one: the file is diffed by its chunks, with a note that says why.
#[test]
fn offsets_that_wrap_around_are_refused_with_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repository::open_local(&tmp.path().join("repo"), true, false).unwrap();
    let vol = VolumeName::parse("weights/t").unwrap();
    let crafted = |b: u64, e: u64, seed: u64| {
        let header =
            format!(r#"{{"t":{{"dtype":"U8","shape":[1],"data_offsets":[{b},{e}]}}}}      "#);
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(&noise(1 << 20, seed));
        out
    };
    for (i, (b, e)) in [(0, u64::MAX - 7), (u64::MAX - 100, u64::MAX - 7)]
        .into_iter()
        .enumerate()
    {
        let dir = tmp.path().join(format!("case{i}"));
        let v1 = push_dir(
            &repo,
            &dir.join("a"),
            &[("m.safetensors", crafted(b, e, 1))],
        );
        let v2 = push_dir(
            &repo,
            &dir.join("b"),
            &[("m.safetensors", crafted(b, e, 2))],
        );
        for (from, to) in [(&v1, &v2), (&v1, &v1)] {
            let d = diff(&repo, (&vol, from), (&vol, to)).unwrap();
            for f in &d.files {
                assert!(f.tensors.is_none(), "[{b}, {e}]: {f:?}");
            }
        }
        let d = diff(&repo, (&vol, &v1), (&vol, &v2)).unwrap();
        let note = d.files[0].tensor_note.as_deref().unwrap_or("");
        assert!(note.contains("do not lie within the file"), "{note}");
    }
}
