//! `sealvol --demo`: a newcomer with an empty repository gets a few realistic volumes
//! (safetensors checkpoints of bf16 weights, a LoRA adapter, a tokenizer) with versions
//! and tags to look at, instead of an empty screen; and three deployment files that
//! mount them (`<state>/demo/deploy/`), one of which drifts, for the Deployments screen
//! and its rollback.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::{Error, Name, Ref, Repository, Result, VolumeName};

use super::Ctx;

/// Seeds the repository if it has no volumes; returns whether it did.
pub fn seed_if_empty(ctx: &Ctx) -> Result<bool> {
    let repo = ctx.open_repo(true)?;
    if !repo.volumes(None)?.is_empty() {
        return Ok(false);
    }
    let work = std::env::temp_dir().join(format!("sealvol-demo-{}", std::process::id()));
    let result = seed(&repo, &work);
    let _ = std::fs::remove_dir_all(&work);
    result.map(|()| true)
}

fn seed(repo: &Repository, work: &Path) -> Result<()> {
    let layers = 12;
    let base = Checkpoint::new(layers, 1);
    let tuned = base.tuned(layers - 2, 2);
    let inserted = tuned.with_extra_tensor();
    let weights = vol("weights/tiny-llama")?;
    let v1 = push_dir(repo, work, "w1", &weights, &[], |d| base.write(d))?;
    let v2 = push_dir(repo, work, "w2", &weights, &[], |d| tuned.write(d))?;
    push_dir(repo, work, "w3", &weights, &["canary"], |d| {
        inserted.write(d)
    })?;
    let prod = tag("prod")?;
    repo.move_tag(&weights, &prod, &v1, None)?;
    repo.move_tag(&weights, &prod, &v2, None)?;

    let lora = vol("adapters/support-lora")?;
    let a = Checkpoint::new(2, 7);
    push_dir(repo, work, "l1", &lora, &[], |d| a.write(d))?;
    push_dir(repo, work, "l2", &lora, &["prod"], |d| {
        a.tuned(1, 8).write(d)
    })?;

    let tok = vol("tokenizers/bpe-32k")?;
    push_dir(repo, work, "t1", &tok, &["prod"], |d| {
        write(&d.join("tokenizer.json"), tokenizer_json().as_bytes())
    })?;
    Ok(())
}

/// The demo's deployment files: `prod` pins the weights' `prod` version, `canary` its
/// `canary` one (so the two disagree), `staging` follows the tag `prod`; all follow the
/// adapter's and tokenizer's tags. Written once, then left as the user edits them;
/// none when the demo's volumes are not there.
pub fn deployments(ctx: &Ctx) -> Result<Option<PathBuf>> {
    let dir = ctx.settings.state.join("demo").join("deploy");
    if dir.is_dir() {
        return Ok(Some(dir));
    }
    let repo = ctx.open_repo(false)?;
    let pinned = |r: &str| -> Option<String> {
        let r = Ref::parse(r).ok()?;
        let d = repo.resolve(&r).ok()?;
        Some(Ref::pinned(r.volume, d).to_string())
    };
    let (Some(prod), Some(canary)) = (
        pinned("vol:weights/tiny-llama:prod"),
        pinned("vol:weights/tiny-llama:canary"),
    ) else {
        return Ok(None);
    };
    for (name, weights, replicas) in [
        ("prod", prod.as_str(), 12),
        ("canary", canary.as_str(), 1),
        ("staging", "vol:weights/tiny-llama:prod", 2),
    ] {
        let text = format!(
            "# A deployment of the demo (sealvol --demo): the console's Deployments screen (D)
# shows it beside the others; b rolls one back. Every key but `sealvol` is the
# deployment's own and left alone.
name: {name}
replicas: {replicas}
sealvol:
  mounts:
    - ref: {weights}
      path: /app/weights
    - ref: vol:adapters/support-lora:prod
      path: /app/lora
    - ref: vol:tokenizers/bpe-32k:prod
      path: /app/tokenizer
"
        );
        let folder = dir.join(name);
        std::fs::create_dir_all(&folder).map_err(|e| Error::io("cannot create", &folder, e))?;
        write(&folder.join("config.yaml"), text.as_bytes())?;
    }
    Ok(Some(dir))
}

fn vol(s: &str) -> Result<VolumeName> {
    VolumeName::parse(s)
}

fn tag(s: &str) -> Result<Name> {
    Name::parse("tag", s)
}

fn push_dir(
    repo: &Repository,
    work: &Path,
    name: &str,
    volume: &VolumeName,
    tags: &[&str],
    fill: impl FnOnce(&Path) -> Result<()>,
) -> Result<sealvol_core::Digest> {
    let dir = work.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("cannot create", &dir, e))?;
    fill(&dir)?;
    let tags = tags.iter().map(|t| tag(t)).collect::<Result<Vec<_>>>()?;
    let report = push(
        repo,
        &dir,
        volume,
        &tags,
        &PushOptions {
            cancel: None,
            guard: None,
            source: Some(format!("demo://{volume}/{name}")),
            stat_cache: None,
            progress: &Quiet,
            labels: [("demo".to_string(), name.to_string())].into(),
        },
    )?;
    Ok(report.digest)
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(|e| Error::io("cannot write", path, e))
}

/// A small transformer-shaped checkpoint: per layer four square bf16 matrices.
#[derive(Clone)]
struct Checkpoint {
    /// (name, rows, cols, seed)
    tensors: Vec<(String, usize, usize, u64)>,
    layers: usize,
}

const HIDDEN: usize = 256;

impl Checkpoint {
    fn new(layers: usize, seed: u64) -> Checkpoint {
        let mut tensors = Vec::new();
        for l in 0..layers {
            for m in ["q_proj", "k_proj", "v_proj", "o_proj"] {
                tensors.push((
                    format!("model.layers.{l}.self_attn.{m}.weight"),
                    HIDDEN,
                    HIDDEN,
                    seed * 1000 + (l * 4) as u64 + m.len() as u64,
                ));
            }
        }
        Checkpoint { tensors, layers }
    }

    /// The layers from `from` on get new weights, as in a partial fine-tune.
    fn tuned(&self, from: usize, seed: u64) -> Checkpoint {
        let mut c = self.clone();
        for (name, _, _, s) in &mut c.tensors {
            let layer: usize = name
                .split('.')
                .nth(2)
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            if layer >= from {
                *s = s.wrapping_mul(31).wrapping_add(seed);
            }
        }
        c
    }

    fn with_extra_tensor(&self) -> Checkpoint {
        let mut c = self.clone();
        let mid = c.tensors.len() / 2;
        c.tensors
            .insert(mid, ("model.lora_extra.weight".into(), HIDDEN, 64, 99));
        c
    }

    fn write(&self, dir: &Path) -> Result<()> {
        let mut header = String::from("{");
        let mut data = Vec::new();
        for (name, r, c, seed) in &self.tensors {
            let start = data.len();
            data.extend(bf16_weights(r * c, *seed));
            let _ = write!(
                header,
                "\"{name}\":{{\"dtype\":\"BF16\",\"shape\":[{r},{c}],\"data_offsets\":[{start},{}]}},",
                data.len()
            );
        }
        header.push_str("\"__metadata__\":{\"format\":\"pt\"}}");
        while header.len() % 8 != 0 {
            header.push(' ');
        }
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header.as_bytes());
        file.extend_from_slice(&data);
        write(&dir.join("model.safetensors"), &file)?;
        let config = format!(
            "{{\n  \"architectures\": [\"DemoForCausalLM\"],\n  \"hidden_size\": {HIDDEN},\n  \"num_hidden_layers\": {},\n  \"torch_dtype\": \"bfloat16\"\n}}\n",
            self.layers
        );
        write(&dir.join("config.json"), config.as_bytes())
    }
}

/// bf16 values near normal(0, 0.02), as trained weights are: enough entropy that they
/// do not compress, like the real thing.
fn bf16_weights(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(n * 2);
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Sum of uniforms ≈ normal; scaled to σ ≈ 0.02.
        let u = ((x & 0xffff) as f32 + ((x >> 16) & 0xffff) as f32 + ((x >> 32) & 0xffff) as f32)
            / 65536.0
            - 1.5;
        let v = u * 0.04;
        let bits = (v.to_bits() >> 16) as u16;
        out.extend_from_slice(&bits.to_le_bytes());
    }
    out
}

fn tokenizer_json() -> String {
    let mut s = String::from("{\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for i in 0..32000 {
        let _ = write!(s, "\"tok{i}\":{i},");
    }
    s.pop();
    s.push_str("}}}\n");
    s
}
