"""The package index, `backends.json`: which signed backend packages a release publishes, where.

    {"format": 1, "packages": [{"variant": "rocm-rdna3", "version": "0.2.0",
      "platform": "linux-x86_64", "targets": ["gfx1100", ...], "kernel": "kvstudio-fa.3",
      "summary": "...", "sha256": "<of the archive>", "size": 69206016,
      "signature": {"key": "5d080de67a79c4fc", "value": "<base64>"},
      "url": "https://github.com/.../kvstudio-backend-rocm-rdna3-0.3.36-linux-x86_64.tar.gz"}]}

scripts/release.py writes it; the app reads it only when the user asks (app/backends/install.py
fetches it). The index is not what the app trusts: the archive it points at must have the sha256
and size it gives, and its manifest must carry a trusted signature and the variant and version
the index names (app/backends/package_archive.py). A URL may be relative to the index's own.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from urllib.parse import urljoin

from app.backends.manifest import VERSION, BackendManifest
from app.platform.errors import BadInputError
from app.platform.units import size_number

INDEX_FORMAT = 1
INDEX_NAME = "backends.json"
MAX_INDEX_BYTES = 1 << 20
MAX_PACKAGE_BYTES = 4 << 30  # the largest real archive is 66 MiB (every RDNA3 target)
_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{0,39}$")


class BadIndexError(BadInputError):
    """The index is not one this app can read: one sentence."""


@dataclass(frozen=True)
class IndexEntry:
    variant: str
    version: str
    platform: str
    targets: tuple[str, ...]
    kernel: str
    summary: str
    sha256: str
    size: int
    key: str  # the id of the key that signed its manifest
    signature: str  # base64, as in the archive's manifest.sig
    url: str  # absolute once parsed (resolved against the index's URL)

    def to_json_object(self) -> dict[str, object]:
        data = asdict(self)
        data["targets"] = list(self.targets)
        data["signature"] = {"key": data.pop("key"), "value": self.signature}
        return data

    def describe(self) -> str:
        """ "rocm-rdna3 0.2.0 (66.0 MiB)" """
        return f"{self.variant} {self.version} ({size_number(self.size, 'MiB')} MiB)"


@dataclass(frozen=True)
class PackageIndex:
    url: str
    entries: tuple[IndexEntry, ...]

    def entry_for(self, variant: str, platform: str) -> IndexEntry | None:
        """The newest package of `variant` built for `platform`, if the index has one."""
        found = [e for e in self.entries if e.variant == variant and e.platform == platform]
        return max(found, key=lambda e: version_key(e.version), default=None)


def version_key(version: str) -> tuple[int, ...]:
    """ "0.10.1" -> (0, 10, 1); "" (a package made before releases) sorts first."""
    return tuple(int(part) for part in version.split(".")) if version else ()


def update_for(index: PackageIndex, installed: BackendManifest) -> IndexEntry | None:
    """The index's package that is newer than the installed one of the same variant, if any."""
    entry = index.entry_for(installed.name, installed.platform)
    if entry is None or version_key(entry.version) <= version_key(installed.version):
        return None
    return entry


def index_json(entries: list[IndexEntry]) -> str:
    packages = [e.to_json_object() for e in sorted(entries, key=lambda e: e.variant)]
    return json.dumps({"format": INDEX_FORMAT, "packages": packages}, indent=2) + "\n"


def parse_index(text: str, index_url: str) -> PackageIndex:
    """The index from its JSON text; BadIndexError (one sentence) when it is not one."""
    try:
        raw = json.loads(text)
    except ValueError:
        raise BadIndexError(f"The package index at {index_url[:100]} is not JSON.") from None
    if not isinstance(raw, dict) or raw.get("format") != INDEX_FORMAT:
        raise BadIndexError(
            f"The package index at {index_url[:100]} is not format {INDEX_FORMAT}; "
            "a newer app may read it."
        )
    packages = raw.get("packages")
    if not isinstance(packages, list):
        raise BadIndexError(f"The package index at {index_url[:100]} lists no packages.")
    return PackageIndex(index_url, tuple(_entry(p, n, index_url) for n, p in enumerate(packages)))


def _entry(raw: object, number: int, index_url: str) -> IndexEntry:
    def bad(what: str) -> BadIndexError:
        return BadIndexError(f"Package {number + 1} of the index {what}.")

    if not isinstance(raw, dict):
        raise bad("is not an object")
    texts = ("variant", "version", "platform", "kernel", "summary", "sha256", "url")
    if not all(isinstance(raw.get(k), str) for k in texts):
        raise bad(f"lacks one of {', '.join(texts)}")
    if not _NAME.match(raw["variant"]) or not VERSION.match(raw["version"]):
        raise bad("has no valid variant and version")
    if not re.fullmatch(r"[0-9a-f]{64}", raw["sha256"]):
        raise bad("has no valid sha256")
    size = raw.get("size")
    if not isinstance(size, int) or not 0 < size <= MAX_PACKAGE_BYTES:
        raise bad("has no size a package can have")
    targets = raw.get("targets", [])
    if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        raise bad("has no list of targets")
    signature = raw.get("signature")
    if not (
        isinstance(signature, dict)
        and isinstance(signature.get("key"), str)
        and isinstance(signature.get("value"), str)
    ):
        raise bad("has no signature")
    return IndexEntry(
        variant=raw["variant"],
        version=raw["version"],
        platform=raw["platform"][:40],
        targets=tuple(t[:20] for t in targets[:32]),
        kernel=raw["kernel"][:40],
        summary=raw["summary"][:300],
        sha256=raw["sha256"],
        size=size,
        key=signature["key"][:16],
        signature=signature["value"][:200],
        url=urljoin(index_url, raw["url"]),
    )
