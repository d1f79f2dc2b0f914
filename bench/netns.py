"""An emulated cluster on one machine: network namespaces joined by one bridge, each
link shaped with tc (tbf; this kernel has no netem), latency added by a delaying TCP
proxy (`Delay`). Used by bench/cluster.py and by the cluster tests (tests/cluster.rs).

Everything it makes carries one prefix (`sv<pid>`), is listed as it is made, and is
removed by `Cluster.close()` (also on an exception, SIGTERM or SIGINT): namespaces,
their veth pairs (they go with their namespace), and the bridge's namespace. Traffic
stays on the addresses it gives out (10.231.0.0/24): no namespace has a route anywhere
else.

Needs root (CAP_NET_ADMIN) and iproute2.

`python3 netns.py delay LISTEN UPSTREAM SECONDS COUNTS` runs a `Delay` in the
namespace it is started in (under `nsenter --net=…`), writing the bytes it carried
each way to COUNTS ("up down") every 50 ms.
"""

import asyncio
import os
import signal
import subprocess
import threading
import time

SUBNET = "10.231.0"


def sh(*args, check=True, ns=None):
    """Runs a command (in namespace `ns` if given), returns its stdout."""
    cmd = list(args)
    if ns is not None:
        cmd = ["ip", "netns", "exec", ns] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def can_make_namespaces():
    """Whether this process may make network namespaces (root, iproute2 there)."""
    name = f"svprobe{os.getpid()}"
    try:
        sh("ip", "netns", "add", name)
    except (RuntimeError, FileNotFoundError):
        return False
    sh("ip", "netns", "del", name, check=False)
    return True


class Cluster:
    """Namespaces on one bridge. `add(name, rate)` makes a host with its own address
    whose link (both ways) is shaped to `rate` (e.g. "8gbit")."""

    def __init__(self):
        self.prefix = f"sv{os.getpid()}"
        self.switch = f"{self.prefix}-sw"
        self.hosts = {}  # name -> (namespace, address)
        self.made = []  # namespaces, to remove
        self.next = 2
        self._old = {}
        for s in (signal.SIGTERM, signal.SIGINT):
            self._old[s] = signal.signal(s, self._on_signal)
        sh("ip", "netns", "add", self.switch)
        self.made.append(self.switch)
        sh("ip", "link", "add", "br0", "type", "bridge", ns=self.switch)
        sh("ip", "link", "set", "br0", "up", ns=self.switch)
        sh("ip", "link", "set", "lo", "up", ns=self.switch)

    def _on_signal(self, signum, frame):
        self.close()
        raise SystemExit(128 + signum)

    def add(self, name, rate):
        """A host `name` on the bridge, its link shaped to `rate` each way: returns its
        namespace and its address."""
        ns = f"{self.prefix}-{name}"
        addr = f"{SUBNET}.{self.next}"
        self.next += 1
        i = len(self.made)
        inside, outside = f"v{i}", f"{self.prefix[:6]}s{i}"
        sh("ip", "netns", "add", ns)
        self.made.append(ns)
        sh("ip", "link", "add", inside, "netns", ns, "type", "veth", "peer", "name", outside,
           "netns", self.switch)
        sh("ip", "link", "set", outside, "master", "br0", ns=self.switch)
        sh("ip", "link", "set", outside, "up", ns=self.switch)
        sh("ip", "link", "set", "lo", "up", ns=ns)
        sh("ip", "addr", "add", f"{addr}/24", "dev", inside, ns=ns)
        sh("ip", "link", "set", inside, "up", ns=ns)
        # Both directions: the host's sending on its end, its receiving on the bridge's.
        for dev, where in ((inside, ns), (outside, self.switch)):
            sh("tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
               "burst", burst(rate), "latency", "100ms", ns=where)
        self.hosts[name] = (ns, addr)
        return ns, addr

    def close(self):
        for ns in reversed(self.made):
            sh("ip", "netns", "pids", ns, check=False)
            for pid in sh("ip", "netns", "pids", ns, check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            sh("ip", "netns", "del", ns, check=False)
        self.made = []
        for s, h in self._old.items():
            signal.signal(s, h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def burst(rate):
    """A tbf bucket for `rate`: about 2 ms of it, at least 64 KiB (a timer tick's worth
    must fit, or the link runs below its rate)."""
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for u, m in units.items():
        if rate.endswith(u):
            bps = float(rate[: -len(u)]) * m
            return str(max(64 << 10, int(bps / 8 * 0.002)))
    raise ValueError(f"rate {rate}: give kbit, mbit or gbit")


class Delay:
    """A TCP proxy that delays every byte by `seconds` each way, without limiting the
    rate (bytes are queued, each piece released `seconds` after it arrived): the
    latency tc's netem would add. It counts the bytes it carries each way. Runs on a
    thread of its own in the caller's network namespace, so start it with
    `run_in(ns)` from a process in that namespace (bench/cluster.py does)."""

    def __init__(self, listen, upstream, seconds):
        self.listen, self.upstream, self.seconds = listen, upstream, seconds
        self.up_bytes = 0  # client to upstream
        self.down_bytes = 0  # upstream to client
        # Where request lines and ranges are written, if anywhere (SEALVOL_DELAY_LOG).
        log = os.environ.get("SEALVOL_DELAY_LOG")
        self.log = open(log, "a") if log else None

    async def _pipe(self, reader, writer, count):
        queue = asyncio.Queue()

        async def release():
            while True:
                at, data = await queue.get()
                if data is None:
                    break
                wait = at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
            writer.close()

        releaser = asyncio.create_task(release())
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            count(data)
            await queue.put((time.monotonic() + self.seconds, data))
        await queue.put((0, None))
        await releaser

    async def _serve(self, client_r, client_w):
        host, port = self.upstream
        try:
            up_r, up_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return

        def up(data):
            self.up_bytes += len(data)
            if self.log:
                # Request lines and ranges, for a look at what the origin was asked.
                for line in data.split(b"\r\n"):
                    if line[:4] in (b"GET ", b"PUT ", b"HEAD", b"POST") or \
                            line.lower().startswith(b"range:"):
                        self.log.write(line.decode("latin-1") + "\n")
                self.log.flush()

        def down(data):
            self.down_bytes += len(data)

        await asyncio.gather(
            self._pipe(client_r, up_w, up), self._pipe(up_r, client_w, down),
            return_exceptions=True)

    def start(self):
        ready = threading.Event()

        def run():
            loop = asyncio.new_event_loop()
            server = loop.run_until_complete(
                asyncio.start_server(self._serve, self.listen[0], self.listen[1]))
            ready.set()
            loop.run_until_complete(server.serve_forever())

        threading.Thread(target=run, daemon=True).start()
        ready.wait(10)


def address(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


def main(argv):
    if len(argv) != 5 or argv[0] != "delay":
        raise SystemExit("usage: netns.py delay LISTEN UPSTREAM SECONDS COUNTS")
    d = Delay(address(argv[1]), address(argv[2]), float(argv[3]))
    d.start()
    counts, tmp = argv[4], argv[4] + ".tmp"
    while True:
        with open(tmp, "w") as f:
            f.write(f"{d.up_bytes} {d.down_bytes}\n")
        os.replace(tmp, counts)
        time.sleep(0.05)


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
