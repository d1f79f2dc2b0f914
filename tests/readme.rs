//! README.md's transcripts are the binary's own output. Each ```text block after a
//! `<!-- transcript: NAME -->` line is run, command by command, in one bash session
//! (in a fresh folder, with its own repository, the clock set a minute later for each
//! command), and what it prints must be what the README shows. Only what differs
//! between runs by nature is masked: elapsed times and rates when comparing, and the
//! host (`node7`) and the folder the commands run in (`./`) in what is shown.
//!
//! Every command an output offers (`` `sealvol …` `` in a hint or an undo line) is then
//! run as printed, after the block, and must succeed, or offer the next command that
//! does (`repair` that cannot heal says to run `repair --from DIR`).
//!
//! When output changes on purpose: `SEALVOL_README=write cargo test --test readme`
//! writes it into README.md (review the diff).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Env, noise, write};

const MARK: &str = "<!-- transcript: ";

/// One transcript: where its text sits in the README, and its commands.
struct Block {
    name: String,
    /// Byte range of the text between the fences.
    range: std::ops::Range<usize>,
    /// Each command (`$ ` stripped) and the output shown under it.
    steps: Vec<(String, String)>,
}

fn readme_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")
}

fn blocks(readme: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = readme[at..].find(MARK) {
        let start = at + i;
        let name_end = start + readme[start..].find(" -->").expect("a closed marker");
        let name = readme[start + MARK.len()..name_end].to_string();
        let fence = name_end + readme[name_end..].find("```text\n").expect("a text block");
        let body = fence + "```text\n".len();
        let end = body + readme[body..].find("```\n").expect("a closed block");
        let mut steps: Vec<(String, String)> = Vec::new();
        for line in readme[body..end].lines() {
            match line.strip_prefix("$ ") {
                Some(cmd) => steps.push((cmd.to_string(), String::new())),
                None => {
                    let (_, shown) = steps.last_mut().expect("a command first");
                    shown.push_str(line);
                    shown.push('\n');
                }
            }
        }
        out.push(Block {
            name,
            range: body..end,
            steps,
        });
        at = end;
    }
    out
}

/// The folders the transcripts name: two checkpoints of a small model, the second a
/// fine-tune of its last layers, without the first one's notes.
fn fixtures(dir: &Path) {
    let tensors = |seed_of: &dyn Fn(usize) -> u64| {
        let t: Vec<(String, Vec<u8>)> = (0..48)
            .map(|i| {
                let layer = i / 4;
                let m = ["q_proj", "k_proj", "v_proj", "o_proj"][i % 4];
                (
                    format!("model.layers.{layer}.self_attn.{m}.weight"),
                    noise(128 << 10, seed_of(i)),
                )
            })
            .collect();
        sealvol_core::testutil::safetensors(&t)
    };
    let c1 = dir.join("ckpt-1000");
    write(&c1.join("model.safetensors"), &tensors(&|i| 1 + i as u64));
    write(&c1.join("notes.md"), b"step 1000: warm-up done\n");
    let c2 = dir.join("ckpt-2000");
    write(
        &c2.join("model.safetensors"),
        &tensors(&|i| {
            if i >= 40 {
                1000 + i as u64
            } else {
                1 + i as u64
            }
        }),
    );
    write(
        &c2.join("special_tokens_map.json"),
        b"{\"eos_token\": \"</s>\"}\n",
    );
    for c in [&c1, &c2] {
        write(
            &c.join("config.json"),
            b"{\"num_hidden_layers\": 12, \"hidden_size\": 256}\n",
        );
        write(
            &c.join("generation_config.json"),
            b"{\"max_new_tokens\": 256}\n",
        );
        write(&c.join("tokenizer.json"), &noise(64 << 10, 99));
        write(
            &c.join("tokenizer_config.json"),
            b"{\"model_max_length\": 4096}\n",
        );
    }
    // A LoRA adapter, and three deployments: prod pins ckpt-1000, canary pins
    // ckpt-2000, staging follows the tag prod; all follow the adapter's tag.
    write(
        &dir.join("lora/adapter_model.safetensors"),
        &noise(256 << 10, 5),
    );
    write(&dir.join("lora/adapter_config.json"), b"{\"r\": 16}\n");
    let digest = |d: &Path| sealvol_core::walk::digest_dir(d).unwrap().to_string();
    let deployment = |name: &str, weights: String| {
        let text = format!(
            "# {name}: served by the inference fleet\nreplicas: 4\nsealvol:\n  mounts:\n    - ref: {weights}\n      path: /app/weights\n    - ref: adapters/support-lora:prod\n      path: /app/lora\n"
        );
        write(
            &dir.join(format!("deploy/{name}/config.yaml")),
            text.as_bytes(),
        );
    };
    deployment("prod", format!("vol:weights/tiny@{}", digest(&c1)));
    deployment("canary", format!("vol:weights/tiny@{}", digest(&c2)));
    deployment("staging", "weights/tiny:prod".into());
}

const SEP: &str = "@@sealvol-readme-step@@";

/// `script` in bash, in the block's folder, with the block's repository and state.
fn shell(env: &Env, script: &str) -> std::process::Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_sealvol")).parent().unwrap();
    Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(env.path("work"))
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("SEALVOL_REPO", &env.repo)
        .env("SEALVOL_STATE", &env.state)
        .env("XDG_CONFIG_HOME", env.path("config"))
        .env("USER", "ana")
        .env("COLUMNS", "100")
        .env_remove("SEALVOL_THEME")
        .output()
        .expect("bash")
}

/// The commands the outputs offer (`` `sealvol …` ``), but templates to fill in
/// (`weights/tiny@DIGEST`).
fn hints(outputs: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for text in outputs {
        for (i, part) in text.split('`').enumerate() {
            let template = part
                .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .any(|w| w.len() > 1 && w.chars().all(|c| c.is_ascii_uppercase()));
            if i % 2 == 1
                && part.starts_with("sealvol ")
                && !template
                && !out.contains(&part.to_string())
            {
                out.push(part.to_string());
            }
        }
    }
    out
}

/// Runs a block's commands in one bash session; returns each command's output.
fn run(env: &Env, block: &Block) -> Vec<String> {
    let work = env.path("work");
    fixtures(&work);
    let mut script = String::from("set +e\n");
    for (i, (cmd, _)) in block.steps.iter().enumerate() {
        // A minute a step from 2026-11-29 23:55, into the next day when a block is long.
        let at = humantime::parse_rfc3339("2026-11-29T23:55:00Z").unwrap()
            + std::time::Duration::from_secs(60 * i as u64);
        let at = humantime::format_rfc3339_seconds(at);
        // `$?` is carried over the separator, for a step that shows it.
        script.push_str(&format!(
            "__s=$?; echo '{SEP}'; export SEALVOL_NOW={at}; (exit $__s)\n{cmd}\n"
        ));
    }
    let out = shell(env, &format!("exec 2>&1\n{script}"));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut parts: Vec<String> = text.split(&format!("{SEP}\n")).map(String::from).collect();
    parts.remove(0);
    assert_eq!(parts.len(), block.steps.len(), "{text}");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    // The folder the commands ran in is shown as `.`, the host as `node7`, the test's
    // repository as the default one a reader has.
    let here = format!("{}/", work.display());
    let repo = env.repo.display().to_string();
    parts
        .into_iter()
        .map(|p| {
            p.replace(&format!("ana@{}", host.trim()), "ana@node7")
                .replace(&repo, "~/.local/share/sealvol/repo")
                .replace(&here, "./")
        })
        .collect()
}

/// What may differ between two runs of the same commands: elapsed times and rates. A
/// push shows its rate only when it took half a second or more (`push_summary`), which
/// a busy machine decides: "read 6.1 MiB in 0.6 s (10.3 MiB/s)" and "read 6.1 MiB" are
/// the same line.
fn masked(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut l = line.to_string();
        if let (Some(a), Some(b)) = (l.find(" in "), l.find("/s)"))
            && a < b
            && l[a..b].contains(" s (")
        {
            l = format!("{}{}", &l[..a], &l[b + 3..]);
        }
        out.push_str(&l);
        out.push('\n');
    }
    out
}

#[test]
fn the_readme_transcripts_are_what_the_binary_prints() {
    let path = readme_path();
    let readme = std::fs::read_to_string(&path).unwrap();
    let found = blocks(&readme);
    assert!(
        found.iter().any(|b| b.name == "session"),
        "README.md has no session transcript"
    );
    let writing = std::env::var("SEALVOL_README").is_ok_and(|v| v == "write");
    let mut new = readme.clone();
    let mut differences = Vec::new();
    let mut ran_hints = 0;
    // Back to front, so that the earlier ranges stay put while writing.
    for block in found.iter().rev() {
        let env = Env::new();
        let outputs = run(&env, block);
        let mut text = String::new();
        for (i, ((cmd, shown), got)) in block.steps.iter().zip(&outputs).enumerate() {
            // A blank line between commands, for the reader.
            let gap = if i + 1 < outputs.len() && !got.is_empty() {
                "\n"
            } else {
                ""
            };
            text.push_str(&format!("$ {cmd}\n{got}{gap}"));
            if masked(shown).trim_end() != masked(got).trim_end() {
                differences.push(format!(
                    "{}: `{cmd}`\n--- README\n{shown}--- the binary\n{got}",
                    block.name
                ));
            }
        }
        new.replace_range(block.range.clone(), &text);
        // Every command the outputs offer works as printed, after the block: it
        // succeeds, or says what to run next, which does (a few steps at most).
        for hint in hints(&outputs) {
            let mut next = vec![hint.clone()];
            let mut said = String::new();
            let mut ok = false;
            for _step in 0..3 {
                let Some(cmd) = next.pop() else { break };
                let out = shell(&env, &cmd);
                ran_hints += 1;
                if out.status.success() {
                    ok = true;
                    break;
                }
                let err = String::from_utf8_lossy(&out.stderr).to_string();
                said.push_str(&format!("$ {cmd}\n{err}"));
                next = hints(&[err]);
            }
            if !ok {
                differences.push(format!("{}: the hint `{hint}` fails:\n{said}", block.name));
            }
        }
    }
    assert!(
        ran_hints >= 2,
        "the transcripts offer hints to run: {ran_hints}"
    );
    if writing {
        std::fs::write(&path, new).unwrap();
        return;
    }
    assert!(
        differences.is_empty(),
        "README.md disagrees with the binary (SEALVOL_README=write cargo test --test readme rewrites it):\n\n{}",
        differences.join("\n")
    );
}
