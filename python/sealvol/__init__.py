"""sealvol for Python: resolve a ref, list and open the files of a sealed version (every
byte proven against its digest before you see it), pull and push, over the same engine,
settings and addresses as the `sealvol` CLI (a folder, `s3://…`, a `sealvol serve` with
`remote=` and an API key, cache peers, the node cache, the trust policy).

    import sealvol
    client = sealvol.Client()                      # as the CLI: SEALVOL_*, config.toml
    v = client.resolve("weights/qwen3-8b:prod")    # v.ref is pinned: vol:…@b3:…
    with client.open(v.ref, "config.json") as f:
        config = json.load(f)
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import BinaryIO, Dict, List, Optional, Sequence

from . import _native
from ._native import (
    Damaged,
    Error,
    InvalidRef,
    NotFound,
    PermissionDenied,
    Timeout,
    Untrusted,
)

__all__ = [
    "Client",
    "Version",
    "FileInfo",
    "File",
    "Tensors",
    "TensorInfo",
    "Error",
    "NotFound",
    "Damaged",
    "PermissionDenied",
    "Untrusted",
    "Timeout",
    "InvalidRef",
]

for _exc in (Error, NotFound, Damaged, PermissionDenied, Untrusted, Timeout, InvalidRef):
    _exc.__module__ = "sealvol"
    if not hasattr(_exc, "hint"):
        _exc.hint = None


@dataclass(frozen=True)
class FileInfo:
    """One entry of a version: a file (`size`, `hash`), a link (`target`) or an empty folder."""

    path: str
    kind: str
    size: int = 0
    hash: Optional[str] = None
    target: Optional[str] = None


@dataclass(frozen=True)
class Version:
    """A sealed version: `ref` is pinned (`vol:NS/NAME@b3:…`), whatever ref named it."""

    ref: str
    volume: str
    digest: str
    created: str
    labels: Dict[str, str] = field(default_factory=dict)
    tags: List[str] = field(default_factory=list)
    files: List[FileInfo] = field(default_factory=list)


class _Raw(io.RawIOBase):
    """The native file as Python's raw I/O: positioned reads of proven bytes."""

    def __init__(self, native: "_native.NativeFile") -> None:
        super().__init__()
        self._native = native
        self._pos = 0
        self.name = native.path

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self._native.close()
        super().close()

    def seekable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        self._checkClosed()
        view = memoryview(b).cast("B")
        fd = self._native.backing_fd()
        if fd is not None:
            # The node cache holds the file whole, verified: read into `b` directly.
            want = max(0, min(len(view), self._native.size - self._pos))
            n = os.preadv(fd, [view[:want]], self._pos) if want else 0
            self._pos += n
            return n
        data = self._native.read_at(self._pos, len(view))
        n = len(data)
        view[:n] = data
        self._pos += n
        return n

    def readall(self) -> bytes:
        self._checkClosed()
        parts = []
        while True:
            fd = self._native.backing_fd()
            if fd is not None:
                data = os.pread(fd, max(0, self._native.size - self._pos), self._pos)
            else:
                data = self._native.read_at(self._pos, 16 << 20)
            if not data:
                return b"".join(parts)
            self._pos += len(data)
            parts.append(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._checkClosed()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._native.size + offset
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self._pos = pos
        return pos

    def tell(self) -> int:
        self._checkClosed()
        return self._pos


class File(io.BufferedReader):
    """A file of a sealed version, read-only and seekable, as `open(path, "rb")` gives;
    every byte is proven against the version's digest before it is returned."""

    @property
    def size(self) -> int:
        return self.raw._native.size  # type: ignore[attr-defined]


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a `.safetensors` file: its dtype (`F32`, `BF16`, …), shape, and
    where its bytes are in the file (`begin`, `end`: absolute offsets)."""

    name: str
    dtype: str
    shape: List[int]
    begin: int
    end: int


# safetensors' dtypes as numpy's (BF16 has no numpy type: read it with get_bytes).
_NUMPY_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1",
    "BOOL": "?",
}


class Tensors(Mapping):
    """A `.safetensors` file's tensors, read lazily: the header once (with the bounded
    parser the mount uses), then each tensor's own bytes only when asked for, proven
    like every read."""

    def __init__(self, native: "_native.NativeFile") -> None:
        self._native = native
        tensors, self._metadata = native.safetensors_header()
        self._info = {
            name: TensorInfo(name, dtype, list(shape), begin, end)
            for name, dtype, shape, begin, end in tensors
        }

    def __getitem__(self, name: str):
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._info

    def __iter__(self):
        return iter(self._info)

    def __len__(self) -> int:
        return len(self._info)

    def metadata(self) -> Dict[str, str]:
        """The header's `__metadata__` (empty when it has none)."""
        return dict(self._metadata)

    def info(self, name: str) -> TensorInfo:
        """Where tensor `name` is, its dtype and shape; NotFound names the file."""
        try:
            return self._info[name]
        except KeyError:
            raise NotFound(f"{self._native.path} has no tensor {name!r}") from None

    def get_bytes(self, name: str) -> bytes:
        """Tensor `name`'s raw bytes (little-endian, as stored): only they are read."""
        t = self.info(name)
        parts, at = [], t.begin
        while at < t.end:
            data = self._native.read_range(at, t.end - at)
            if not data:
                raise Damaged(f"{self._native.path}: tensor {name!r} is cut short")
            parts.append(data)
            at += len(data)
        return b"".join(parts)

    def get(self, name: str):  # type: ignore[override]
        """Tensor `name` as a numpy array (numpy must be installed; else `get_bytes`)."""
        import numpy as np

        t = self.info(name)
        dtype = _NUMPY_DTYPES.get(t.dtype)
        if dtype is None:
            raise Error(
                f"{self._native.path}: tensor {name!r} is {t.dtype}, which numpy has no type for"
            )
        return np.frombuffer(self.get_bytes(name), dtype=dtype).reshape(t.shape)


def _follower(progress, what: str):
    """`progress=` as the native calls take it: a callable `(done, total)` as given, True
    for a tqdm bar when tqdm is installed (else nothing), None for nothing. Returns the
    callback and what closes the bar."""
    if progress is None or progress is False:
        return None, lambda: None
    if progress is True:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return None, lambda: None
        bar = tqdm(desc=what, unit="B", unit_scale=True, unit_divisor=1024)

        def update(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        return update, bar.close
    if not callable(progress):
        raise TypeError("progress= takes a callable (done, total), True or None")
    return progress, lambda: None


class Client:
    """The engine, with the settings the CLI would use: each argument left out comes
    from its `SEALVOL_*` variable, then config.toml, then the defaults.

    repo: a folder or `s3://BUCKET/PREFIX` (`SEALVOL_REPO`); remote: a `sealvol serve`
    as `http://HOST:PORT` (`SEALVOL_REMOTE`), with `api_key` (`SEALVOL_API_KEY`);
    peers: cache servers read before the origin; state: the node's state folder;
    timeout: seconds a backend may leave a request unanswered.
    """

    def __init__(
        self,
        repo: Optional[str] = None,
        remote: Optional[str] = None,
        api_key: Optional[str] = None,
        peers: Optional[Sequence[str]] = None,
        state: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> None:
        self._native = _native.Client(
            repo=None if repo is None else os.fspath(repo),
            remote=remote,
            api_key=api_key,
            peers=None if peers is None else list(peers),
            state=None if state is None else os.fspath(state),
            timeout=timeout,
        )

    def resolve(self, ref: str) -> Version:
        """The version `ref` names now, pinned, with its files, labels and tags."""
        v = json.loads(self._native.resolve(ref))
        files = [FileInfo(**f) for f in v.pop("files")]
        return Version(files=files, **v)

    def volumes(self) -> List[dict]:
        """Every volume: namespace, name, versions, tags, latest_bytes, updated, …"""
        return json.loads(self._native.volumes())

    def versions(self, volume: str) -> List[dict]:
        """A volume's versions, newest first: digest, created, bytes, labels, tags, …"""
        return json.loads(self._native.versions(volume))

    def tags(self, volume: str) -> List[dict]:
        """A volume's tags, each with the digest it points at and its history."""
        return json.loads(self._native.tags(volume))

    def open(self, ref: str, path: str) -> File:
        """File `path` of the version `ref` names, open for reading (binary, seekable)."""
        return File(_Raw(self._native.open(ref, path)), buffer_size=1 << 20)

    def tensors(self, ref: str, path: str) -> Tensors:
        """The tensors of `.safetensors` file `path`: a lazy mapping whose `get(name)`
        reads only that tensor's bytes."""
        return Tensors(self._native.open(ref, path, stream=False))

    def pull(
        self,
        ref: str,
        dir: str,
        include: Optional[Sequence[str]] = None,
        exclude: Optional[Sequence[str]] = None,
        force: bool = False,
        progress=None,
    ) -> Version:
        """Writes the version into `dir` (only the paths `include`/`exclude` take), every
        file proven; refuses a folder holding anything else unless `force`.
        `progress`: a callable `(bytes done, total)`, or True for a tqdm bar. Ctrl-C stops
        it within a second, leaving no file half-written under its name."""
        callback, close = _follower(progress, "pull")
        try:
            out = json.loads(
                self._native.pull(
                    ref,
                    os.fspath(dir),
                    include=None if include is None else list(include),
                    exclude=None if exclude is None else list(exclude),
                    force=force,
                    progress=callback,
                )
            )
        finally:
            close()
        return self.resolve(out["ref"])

    def push(
        self,
        dir: str,
        volume: str,
        tag: Optional[str] = None,
        labels: Optional[Dict[str, str]] = None,
        progress=None,
    ) -> Version:
        """Seals `dir` as a version of `volume` (storing only the chunks the repository
        lacks), points `tag` at it, and returns it. `progress` as for `pull`; Ctrl-C
        stops it within a second and seals nothing."""
        callback, close = _follower(progress, "push")
        try:
            out = json.loads(
                self._native.push(
                    os.fspath(dir),
                    volume,
                    tags=None if tag is None else [tag],
                    labels=labels,
                    progress=callback,
                )
            )
        finally:
            close()
        return self.resolve(out["ref"])

    def diff(self, a: str, b: str) -> dict:
        """What changed from version `a` to `b` (`b` may name a tag or digest of `a`'s
        volume: `"canary"`, `"@9f3c"`): `totals` and `files`, each with its chunks and,
        for `.safetensors` files, its tensors (as `sealvol volume diff --json`)."""
        return json.loads(self._native.diff(a, b))

    def verify_signature(self, ref: str, public_keys: Sequence[str]) -> dict:
        """The version's stored OpenSSF model-signing signatures checked against the
        public keys (PEM files): `valid` (one of the keys signed every file), `why` when
        not, and each signature's verdict."""
        return json.loads(self._native.verify_signature(ref, [os.fspath(k) for k in public_keys]))

    def tag(self, ref: str, tag: str, expires: Optional[str] = None) -> str:
        """Points `tag` at the version `ref` names; with `expires` (`"30d"`, `"12h"`, or
        an RFC 3339 time) it stops resolving then. Returns the pinned ref."""
        return self._native.tag(ref, tag, expires)
