"""Archives that would expand to gigabytes from a few megabytes, for the bounded-unpacking tests.

A gzip file may be several gzip members one after another, and a reader decompresses them all as
one stream: so 64 copies of one compressed 64 MiB run of zeros (about 64 KB each) is a 4 MB file
that expands to 4 GiB, written in milliseconds. `bomb` puts real tar bytes (a signed manifest,
a header) in front of those zeros.
"""

from __future__ import annotations

import functools
import gzip
import tarfile
from pathlib import Path

ZEROS_PER_MEMBER = 64 << 20


@functools.cache
def _zeros_member() -> bytes:
    return gzip.compress(bytes(ZEROS_PER_MEMBER), compresslevel=9)


def tar_header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.type = kind
    info.mode = 0o755
    return info.tobuf(tarfile.USTAR_FORMAT)


def tar_file(name: str, data: bytes) -> bytes:
    """One member, header and data padded to the 512-byte block, as tar writes it."""
    return tar_header(name, len(data)) + data + bytes(-len(data) % 512)


def bomb(path: Path, head: bytes, gib: int = 4) -> Path:
    """`head` (tar bytes, compressed) followed by `gib` GiB of zeros in 4 MB of gzip members."""
    with path.open("wb") as out:
        out.write(gzip.compress(head))
        for _ in range((gib << 30) // ZEROS_PER_MEMBER):
            out.write(_zeros_member())
    return path


def bytes_read_by_this_process() -> int:
    """rchar of /proc/self/io: every byte this process has read through read(2) and friends."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")
