"""One file's transfer from the Hub: streamed into `NAME.part`, resumed with HTTP Range (after a cut, within this
pull and on the next), sha256 checked as it streams, renamed to its real name only when complete and verified.

Bounded: nothing is written past the listed size; a file that can be verified neither by size nor by sha256 (in the
metadata or the X-Linked-Etag header) is refused unless `verify=False` (`--no-verify`); and a transfer slower than
MIN_RATE_BYTES_S over any RATE_WINDOW_S stops with `too_slow` (the partial stays for the next pull)."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import httpx

from backends.llama.models import hub_api
from backends.llama.models.hub_api import client, raise_for_hub
from backends.llama.models.hub_files import HubError

log = logging.getLogger(__name__)

CHUNK = 1 << 20
MAX_RESUMES = 5
"""Cuts one transfer survives by resuming at once; more and the pull stops (the partial stays for the next)."""
PART_SUFFIX = ".part"
MIN_RATE_BYTES_S = 4096
"""The slowest transfer accepted, averaged over RATE_WINDOW_S (a drip feed fails instead of hanging)."""
RATE_WINDOW_S = 30.0


class Progress(Protocol):
    """What a transfer reports: the file's total and the bytes already there, then each chunk's size."""

    def start(self, name: str, total: int | None, initial: int) -> None: ...

    def advance(self, n: int) -> None: ...

    def close(self) -> None: ...


class NoProgress:
    def start(self, name: str, total: int | None, initial: int) -> None:
        pass

    def advance(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


class _Digest:
    """A sha256 that can start over (when a server ignores Range and sends the whole file again)."""

    def __init__(self, part: Path, expected: str | None = None) -> None:
        self.hash = file_sha256(part) if part.exists() else hashlib.sha256()
        self.expected = expected

    def reset(self) -> None:
        self.hash = hashlib.sha256()

    def update(self, data: bytes) -> None:
        self.hash.update(data)

    def hexdigest(self) -> str:
        return self.hash.hexdigest()


class PullCancelledError(HubError):
    def __init__(self, partial: Path) -> None:
        super().__init__("cancelled", f"pull cancelled; the partial file {partial.name} is kept and the next pull "
                                      "continues from it")
        self.partial = partial


def part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + PART_SUFFIX)


def file_sha256(path: Path) -> hashlib._Hash:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest


def _linked_sha256(response: httpx.Response) -> str | None:
    """The LFS sha256 the Hub sends as X-Linked-Etag (its ETag for LFS files), if it looks like one."""
    tag = (response.headers.get("X-Linked-Etag") or "").strip().strip('"').removeprefix("W/").strip('"')
    return tag.lower() if len(tag) == 64 and all(c in "0123456789abcdefABCDEF" for c in tag) else None


class _Rate:
    """At least MIN_RATE_BYTES_S over every RATE_WINDOW_S, else HubError `too_slow`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.since = time.monotonic()
        self.got = 0

    def add(self, n: int) -> None:
        self.got += n
        elapsed = time.monotonic() - self.since
        if elapsed < RATE_WINDOW_S:
            return
        if self.got < MIN_RATE_BYTES_S * elapsed:
            raise HubError("too_slow", f"the transfer of {self.name} is too slow ({self.got} bytes in {elapsed:.0f} s; "
                                       f"at least {MIN_RATE_BYTES_S} bytes/s are expected); the partial file is kept: "
                                       "pull again later, or from another endpoint (HF_ENDPOINT)")
        self.since, self.got = time.monotonic(), 0


def _stream_once(http: httpx.Client, url: str, part: Path, digest: _Digest, repo: str,
                 progress: Progress, cancel: Callable[[], bool], rate: _Rate, size: int | None = None,
                 verify: bool = True) -> None:
    """One GET from the partial's end to the file's end, appended to the partial; raises on a cut (a read that waits
    longer than RATE_WINDOW_S is one). Notes the response's X-Linked-Etag on `digest.expected` when the metadata had
    no sha256. Never writes past `size`; with `verify`, refuses a file that has neither a size nor a sha256 to check
    it by. `rate` is the whole transfer's, across its resumes."""
    offset = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    timeout = httpx.Timeout(hub_api.TIMEOUT.connect, read=min(hub_api.TIMEOUT.read or RATE_WINDOW_S, RATE_WINDOW_S))
    with http.stream("GET", url, headers=headers, timeout=timeout) as response:
        if response.status_code == 416:  # the partial already holds every byte
            return
        raise_for_hub(response, repo, part.name.removesuffix(PART_SUFFIX))
        digest.expected = digest.expected or _linked_sha256(response)
        name = part.name.removesuffix(PART_SUFFIX)
        if verify and size is None and not digest.expected:
            raise HubError("unverifiable", f"{repo}: the Hub lists neither a size nor a sha256 for {name}, so its "
                                           "bytes cannot be checked; nothing was downloaded. Pull from another "
                                           "endpoint, or pass --no-verify to take it unchecked")
        if offset and response.status_code != 206:  # the server ignored Range: start over
            log.info("%s: server sent the whole file; restarting", part.name)
            part.unlink()
            digest.reset()
            progress.advance(-offset)
            offset = 0
        with open(part, "ab") as out:
            for chunk in response.iter_bytes():  # as received: a cut loses nothing already sent
                if cancel():
                    raise PullCancelledError(part)
                if size is not None and offset + len(chunk) > size:
                    out.close()
                    part.unlink()
                    raise HubError("size_mismatch", f"{name}: the server sent more than the {size:,} bytes the Hub "
                                                    "lists; stopped there and removed the partial file, pull again "
                                                    "(a proxy or mirror may be altering it)")
                out.write(chunk)
                offset += len(chunk)
                digest.update(chunk)
                progress.advance(len(chunk))
                rate.add(len(chunk))


def transfer(url: str, dest: Path, size: int | None, sha256: str | None, repo: str,
             progress: Progress | None = None, cancel: Callable[[], bool] | None = None,
             check: Callable[[Path], None] | None = None, verify: bool = True) -> Path:
    """Download `url` to `dest` through `dest.part`: resume, verify, then rename. Ctrl-C and `cancel` keep the
    partial; a sha256 mismatch removes it (its bytes are wrong) and raises HubError `sha_mismatch`; `check`
    inspects the verified partial before the rename. `verify=False` takes a file the Hub lists no size nor
    sha256 for (the bounds on size and rate still hold)."""
    progress = progress or NoProgress()
    cancel = cancel or (lambda: False)
    part = part_path(dest)
    if part.exists() and size is not None and part.stat().st_size > size:
        part.unlink()
    digest = _Digest(part, sha256)
    have = part.stat().st_size if part.exists() else 0
    progress.start(dest.name, size, have)
    cuts = 0
    rate = _Rate(dest.name)  # one rate over every resume: a server that stalls after a few bytes fails within a window
    try:
        with client() as http:
            while True:
                try:
                    _stream_once(http, url, part, digest, repo, progress, cancel, rate, size, verify)
                except (httpx.TransportError, httpx.RemoteProtocolError) as exc:
                    rate.add(0)  # too_slow once a window has passed with too few bytes, stalls and cuts included
                    cuts += 1
                    if cuts > MAX_RESUMES:
                        raise HubError("network", f"the transfer of {dest.name} was cut {cuts} times ({exc}); "
                                                  "run the pull again to continue from the partial file") from None
                    log.warning("%s: transfer cut (%s); resuming from byte %d", dest.name, exc,
                                part.stat().st_size if part.exists() else 0)
                    continue
                got = part.stat().st_size if part.exists() else 0
                if size is None or got >= size:
                    break
                rate.add(0)
                cuts += 1  # a clean end before the last byte: resume as after a cut
                if cuts > MAX_RESUMES:
                    raise HubError("network", f"the transfer of {dest.name} kept ending early; run the pull again")
    finally:
        progress.close()
    _verify(part, dest, size, digest.expected, digest)
    if check is not None:
        check(part)  # e.g. a valid GGUF: raises (and removes the partial) before the file gets its name
    os.replace(part, dest)
    return dest


def _verify(part: Path, dest: Path, size: int | None, sha256: str | None, digest: _Digest) -> None:
    got = part.stat().st_size
    if size is not None and got != size:
        part.unlink()
        raise HubError("size_mismatch", f"{dest.name}: got {got} bytes, the Hub lists {size}; the partial file was "
                                        "removed, pull again")
    if sha256 and digest.hexdigest() != sha256.lower():
        part.unlink()
        raise HubError("sha_mismatch", f"{dest.name}: the downloaded bytes do not match the Hub's sha256 "
                                       f"({digest.hexdigest()[:12]}... != {sha256[:12]}...); the file was removed, "
                                       "nothing was installed; pull again (a proxy or mirror may be altering it)")
