"""The engine's binding (Rust, PyO3); `sealvol` wraps it. Listings come back as JSON."""

from typing import Callable, Dict, List, Optional, Tuple

class Error(Exception):
    hint: Optional[str]

class NotFound(Error): ...
class Damaged(Error): ...
class PermissionDenied(Error): ...
class Untrusted(Error): ...
class Timeout(Error): ...
class InvalidRef(Error): ...

Progress = Optional[Callable[[int, int], object]]

class NativeFile:
    path: str
    size: int
    def read_at(self, offset: int, n: int) -> bytes: ...
    def safetensors_header(
        self,
    ) -> Tuple[List[Tuple[str, str, List[int], int, int]], Dict[str, str]]: ...

class Client:
    def __init__(
        self,
        repo: Optional[str] = ...,
        remote: Optional[str] = ...,
        api_key: Optional[str] = ...,
        peers: Optional[List[str]] = ...,
        state: Optional[str] = ...,
        timeout: Optional[float] = ...,
    ) -> None: ...
    def resolve(self, reference: str) -> str: ...
    def volumes(self) -> str: ...
    def versions(self, volume: str) -> str: ...
    def tags(self, volume: str) -> str: ...
    def open(self, reference: str, path: str) -> NativeFile: ...
    def pull(
        self,
        reference: str,
        dir: str,
        include: Optional[List[str]] = ...,
        exclude: Optional[List[str]] = ...,
        force: bool = ...,
        progress: Progress = ...,
    ) -> str: ...
    def push(
        self,
        dir: str,
        volume: str,
        tags: Optional[List[str]] = ...,
        labels: Optional[Dict[str, str]] = ...,
        progress: Progress = ...,
    ) -> str: ...
    def tag(self, reference: str, tag: str) -> str: ...
