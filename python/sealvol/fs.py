"""fsspec's filesystem for `sealvol://` addresses, registered by the package's entry
point: `fsspec.open("sealvol://weights/tiny:prod/config.json")`, `pandas.read_parquet`,
`datasets` and `pyarrow` read sealed versions without importing sealvol.

An address is `sealvol://NS/VOL[:TAG|@b3:…]/PATH`: the first two parts name the
version (the newest when neither a tag nor a digest is given), the rest a path in it.
Each ref is resolved once per filesystem object and pinned, so a listing and the reads
that follow see one version even while its tag moves. Read-only; every byte proven.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from fsspec import AbstractFileSystem

from . import Client, Version


class SealvolFileSystem(AbstractFileSystem):
    """`sealvol://` for fsspec; its options are `Client`'s (repo, remote, api_key, …)."""

    protocol = "sealvol"
    root_marker = ""

    def __init__(self, repo=None, remote=None, api_key=None, peers=None, state=None, timeout=None, **kwargs):
        super().__init__(**kwargs)
        self.client = Client(repo=repo, remote=remote, api_key=api_key, peers=peers, state=state, timeout=timeout)
        self._pinned: Dict[str, Version] = {}

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("sealvol://"):
            path = path[len("sealvol://"):]
        return path.strip("/")

    def _split(self, path: str) -> Tuple[Version, str]:
        parts = self._strip_protocol(path).split("/", 2)
        if len(parts) < 2:
            raise FileNotFoundError(f"sealvol://{path}: name a version as NS/VOL[:TAG|@b3:…]")
        ref = f"{parts[0]}/{parts[1]}"
        if ref not in self._pinned:
            self._pinned[ref] = self.client.resolve(ref)
        return self._pinned[ref], (parts[2] if len(parts) > 2 else "")

    def _entries(self, version: Version, base: str, path: str) -> List[dict]:
        """The entries directly under folder `path` of `version` (folders implied by
        the paths below them)."""
        prefix = f"{path}/" if path else ""
        out: Dict[str, dict] = {}
        for f in version.files:
            if not f.path.startswith(prefix) or f.path == path:
                continue
            rest = f.path[len(prefix):]
            head, _, below = rest.partition("/")
            name = f"{base}/{prefix}{head}"
            if below or f.kind == "dir":
                out.setdefault(name, {"name": name, "size": 0, "type": "directory"})
            else:
                out[name] = {"name": name, "size": f.size, "type": "file" if f.kind == "file" else "other"}
        return sorted(out.values(), key=lambda e: e["name"])

    def ls(self, path, detail=True, **kwargs):
        version, inner = self._split(path)
        base = self._strip_protocol(path)
        base = base[: len(base) - len(inner)].rstrip("/") if inner else base
        entries = self._entries(version, base, inner)
        if not entries:
            if any(f.path == inner and f.kind == "file" for f in version.files):
                return [self.info(path)] if detail else [self._strip_protocol(path)]
            raise FileNotFoundError(f"sealvol://{self._strip_protocol(path)}")
        return entries if detail else [e["name"] for e in entries]

    def info(self, path, **kwargs):
        version, inner = self._split(path)
        name = self._strip_protocol(path)
        if not inner:
            return {"name": name, "size": 0, "type": "directory"}
        for f in version.files:
            if f.path == inner:
                kind = {"file": "file", "dir": "directory"}.get(f.kind, "other")
                return {"name": name, "size": f.size, "type": kind, "hash": f.hash}
            if f.path.startswith(inner + "/"):
                return {"name": name, "size": 0, "type": "directory"}
        raise FileNotFoundError(f"sealvol://{name}")

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        if mode != "rb":
            raise NotImplementedError(f"sealvol:// is read-only: cannot open with mode {mode!r}")
        version, inner = self._split(path)
        return self.client.open(version.ref, inner)

    def cat_file(self, path, start=None, end=None, **kwargs):
        version, inner = self._split(path)
        with self.client.open(version.ref, inner) as f:
            size = f.size
            start = 0 if start is None else (start if start >= 0 else max(0, size + start))
            end = size if end is None else (end if end >= 0 else max(0, size + end))
            if end <= start:
                return b""
            f.seek(start)
            return f.read(end - start)

    def ukey(self, path):
        return self.info(path).get("hash") or self._strip_protocol(path)
