//! The pull-through mirror's upstream (`hub::upstream::Upstream`) against the Hugging
//! Face stand-in the sync tests use (tests/servers/hf_server.py): a revision's commit
//! and the upstream's answer, and the upstream's refusals read as the Hub's clients
//! read them.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

use sealvol_serve::hub::missing::Missing;
use sealvol_serve::hub::upstream::Upstream;

struct StandIn(std::process::Child, String);

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn stand_in(dir: &std::path::Path, token: &str) -> StandIn {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/servers/hf_server.py");
    let mut child = Command::new("python3")
        .arg(script)
        .args(["--port", "0", "--token", token])
        .arg("--repo")
        .arg(format!("Org/M={}", dir.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string();
    StandIn(child, url)
}

#[test]
fn an_upstream_names_a_revisions_commit_and_its_refusals_are_the_hubs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), b"{}").unwrap();
    let hub = stand_in(dir.path(), "T");
    let up = Upstream::new(&hub.1, Some("T".into()), Duration::from_secs(30)).unwrap();
    let (sha, json) = up.revision(false, "Org/M", "main").unwrap();
    assert_eq!(sha.len(), 40);
    assert_eq!(json["sha"], sha);
    assert_eq!(json["siblings"][0]["rfilename"], "config.json");
    // The commit id names the same revision.
    assert_eq!(up.revision(false, "Org/M", &sha).unwrap().0, sha);

    assert!(matches!(
        up.revision(false, "Org/Nope", "main"),
        Err(Missing::Repo(_))
    ));
    assert!(matches!(
        up.revision(false, "Org/M", "refs/pr/1"),
        Err(Missing::Revision(_))
    ));
    // The server's own token refused: the server's problem, not a repo that is not there.
    let wrong = Upstream::new(&hub.1, Some("W".into()), Duration::from_secs(30)).unwrap();
    assert!(matches!(
        wrong.revision(false, "Org/M", "main"),
        Err(Missing::Failed(_))
    ));
    // An upstream that does not answer: a failure within the patience, not a hang.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let gone = Upstream::new(&url, None, Duration::from_millis(500)).unwrap();
    let started = std::time::Instant::now();
    assert!(matches!(
        gone.revision(false, "Org/M", "main"),
        Err(Missing::Failed(_))
    ));
    assert!(started.elapsed() < Duration::from_secs(20));
}
