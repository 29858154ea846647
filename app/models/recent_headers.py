"""The last few GGUF headers read from local files, kept while their files are unchanged.

One action reads the same header several times (the model picker, the fit check and the load
dialog; `kvstudio run`'s model lookup and its load check), and a header with a 262,144-token
vocabulary costs 0.1-0.2 s of CPU to walk. A header is a frozen value, so the kept one is
handed out again while the file's identity, size, modification and change times are the
same. As git does, a file changed in the last two seconds is never kept: a filesystem's clock
can be too coarse to see a rewrite of the same size within the same tick.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

_KEPT = 8
_RACY_S = 2.0

Header = TypeVar("Header")
FileKey = tuple[str, int, int, int, int, int]

_now = time.time  # the tests move it on, as if a file had been downloaded earlier
_lock = threading.Lock()
_recent: OrderedDict[FileKey, object] = OrderedDict()


def file_key(path: str, info: os.stat_result) -> FileKey:
    """What tells the file at `path` (stat `info`) unchanged: where it is, which file it is,
    its size and its modification and change times (a change time cannot be set back)."""
    return (os.path.realpath(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns,
            info.st_ctime_ns)  # fmt: skip


def changed_lately(info: os.stat_result) -> bool:
    """Whether the file (stat `info`) changed in the last two seconds: then a same-size rewrite
    in the same clock tick would keep its key, so nothing may be remembered by that key."""
    return _now() - max(info.st_mtime_ns, info.st_ctime_ns) / 1e9 <= _RACY_S


def read_through(path: str, read: Callable[[], Header]) -> Header:
    """`read()`'s header for the file at `path`, or the one kept from an earlier read of the
    same unchanged file. Failures are not kept: a refused file is read (and refused) again."""
    try:
        info = os.stat(path)
    except OSError:
        return read()  # the reader says why, in its words
    key = file_key(path, info)
    with _lock:
        kept = _recent.get(key)
        if kept is not None:
            _recent.move_to_end(key)
            return kept  # type: ignore[return-value]  # stored by this function for this key
    header = read()
    if not changed_lately(info):
        with _lock:
            _recent[key] = header
            while len(_recent) > _KEPT:
                _recent.popitem(last=False)
    return header
