"""Unpack a backend package archive, bounded by its signed manifest.

The archive (a .tar.gz of one folder) starts with `manifest.json` and `manifest.sig`. Those two
are read first, from at most HEAD_BYTES of decompressed data, and the signature is checked
(app/backends/signing.py) before anything else is read or written. Every further member must be
a plain file the manifest names, with the size it gives; its bytes are hashed as they stream into
the staging folder. The decompressed stream is capped at what the manifest declares plus the tar
format's own blocks, so an archive that expands past that is refused at the first byte beyond it,
however many gigabytes it would become. Nothing here loads a library: the caller test-loads the
unpacked folder only after this returned.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import platform
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from app.backends.manifest import (
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    SIGNATURE_NAME,
    BackendManifest,
    BadPackageError,
    allowed_file_name,
    check_files,
    parse_manifest,
)
from app.backends.signing import MAX_SIGNATURE_BYTES, SignatureCheck, check_signature
from app.platform.disk_space import check_free_space

BUILT_IN = "built-in"  # app.backends.store.BUILT_IN: no package may take its name
MAX_ARCHIVE_FILES = 64
MAX_UNPACKED_BYTES = 8 << 30  # the largest real package (all ROCm targets) is well below
TAR_SLACK = 64 << 10  # pax headers, the end-of-archive blocks, the last record's padding
HEAD_BYTES = MAX_MANIFEST_BYTES + MAX_SIGNATURE_BYTES + TAR_SLACK
MAX_EXTENDED_HEADER = 16 << 10  # a pax or GNU long-name header: a few hundred bytes in practice
CHUNK = 1 << 20


class ArchiveTooLargeError(BadPackageError):
    """The archive expands past what its manifest declares."""


@dataclass(frozen=True)
class ExpectedPackage:
    """What the index said the archive is, checked against its signed manifest."""

    name: str
    version: str = ""


@dataclass(frozen=True)
class UnpackedPackage:
    folder: Path  # staging/package, holding the manifest, its signature and the files
    manifest: BackendManifest
    signature: SignatureCheck


def platform_tag() -> str:
    """This machine as a manifest names it (kernels/package.py's platform_tag)."""
    return f"{platform.system().lower()}-{platform.machine()}"


class _Budget(io.RawIOBase):
    """The decompressed stream, refusing to yield more than `limit` bytes in all."""

    def __init__(self, source: gzip.GzipFile, limit: int, archive: str) -> None:
        self.source = source
        self.limit = limit
        self.used = 0
        self.archive = archive

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]  # io's signature
        room = self.limit - self.used
        if room <= 0:
            if self.source.read(1):  # more than the manifest accounts for
                raise ArchiveTooLargeError(
                    f"{self.archive} expands past the size its manifest declares, so it was "
                    "refused before that was unpacked."
                )
            return 0
        data = self.source.read(min(len(buffer), room))
        buffer[: len(data)] = data
        self.used += len(data)
        return len(data)


class _SmallHeaders(tarfile.TarInfo):
    """tarfile reads a pax or GNU long-name header whole into memory: refuse a large one first."""

    def _proc_pax(self, tarfile: tarfile.TarFile) -> tarfile.TarInfo:
        self._refuse_large()
        return super()._proc_pax(tarfile)  # type: ignore[misc,no-any-return]  # as below

    def _proc_gnulong(self, tarfile: tarfile.TarFile) -> tarfile.TarInfo:
        self._refuse_large()
        # typeshed leaves out this private hook of tarfile's (CPython 3.8 to 3.14 have it)
        return super()._proc_gnulong(tarfile)  # type: ignore[misc,no-any-return]

    def _refuse_large(self) -> None:
        if self.size > MAX_EXTENDED_HEADER:
            raise BadPackageError("The archive holds a tar header larger than a package's.")


def unpack_package(
    archive: Path,
    staging: Path,
    *,
    allow_unsigned: bool = False,
    expected: ExpectedPackage | None = None,
) -> UnpackedPackage:
    """The archive's package, unpacked into staging/package once its signature, its names and
    every file's size and sha256 are checked; one sentence (BadPackageError) otherwise. Only
    `staging` is written to, and the caller removes it."""
    try:
        source = archive.open("rb")
    except OSError:
        raise BadPackageError(f"{archive.name} cannot be read.") from None
    with source:
        if source.read(2) != b"\x1f\x8b":
            raise BadPackageError(f"{archive.name} is not a .tar.gz backend package.")
        source.seek(0)
        budget = _Budget(gzip.GzipFile(fileobj=source, mode="rb"), HEAD_BYTES, archive.name)
        try:
            tar = tarfile.open(fileobj=budget, mode="r|", tarinfo=_SmallHeaders)
        except (tarfile.TarError, EOFError, OSError, zlib.error):
            raise BadPackageError(f"{archive.name} is not a .tar.gz backend package.") from None
        with tar:
            try:
                return _Reader(archive.name, tar, budget, staging / "package").read(
                    allow_unsigned, expected
                )
            except EOFError:
                raise BadPackageError(f"{archive.name} is damaged (it ends early).") from None
            except (tarfile.TarError, zlib.error, gzip.BadGzipFile):
                raise BadPackageError(
                    f"{archive.name} is damaged (its compressed data is corrupt)."
                ) from None


class _Reader:
    """One pass over the archive's members, in order."""

    def __init__(self, archive: str, tar: tarfile.TarFile, budget: _Budget, folder: Path) -> None:
        self.archive = archive
        self.tar = tar
        self.budget = budget
        self.folder = folder
        self.top: str | None = None

    def read(self, allow_unsigned: bool, expected: ExpectedPackage | None) -> UnpackedPackage:
        first = self._next_file()
        if first is None or first[1] != MANIFEST_NAME:
            raise BadPackageError(
                f"{self.archive} has no manifest.json at its start, so it is not a backend package."
            )
        manifest_bytes = self._small(first[0], MAX_MANIFEST_BYTES, "manifest.json")
        after = self._next_file()
        signature_bytes = None
        if after is not None and after[1] == SIGNATURE_NAME:
            signature_bytes = self._small(after[0], MAX_SIGNATURE_BYTES, SIGNATURE_NAME)
            after = self._next_file()
        signature = check_signature(
            self.archive, manifest_bytes, signature_bytes, allow_unsigned=allow_unsigned
        )
        manifest = parse_manifest(manifest_bytes.decode("utf-8", errors="replace"))
        self._check_manifest(manifest, expected)
        total = sum(f.size for f in manifest.files.values())
        if len(manifest.files) > MAX_ARCHIVE_FILES:
            raise BadPackageError(f"{self.archive} is not one backend folder (too many files).")
        if total > MAX_UNPACKED_BYTES:
            raise BadPackageError(f"{self.archive} unpacks to more than a backend package can be.")
        self.folder.mkdir(parents=True)
        check_free_space(self.folder, total)
        (self.folder / MANIFEST_NAME).write_bytes(manifest_bytes)
        if signature_bytes is not None:
            (self.folder / SIGNATURE_NAME).write_bytes(signature_bytes)
        # From here the stream may hold the manifest's files and the tar format's blocks only.
        blocks = sum(512 + -(-f.size // 512) * 512 for f in manifest.files.values())
        self.budget.limit = self.budget.used + blocks + TAR_SLACK
        written: set[str] = set()
        while after is not None:
            self._write_file(after[0], after[1], manifest, written)
            after = self._next_file()
        check_files(self.folder, manifest, full=False)  # a file the archive lacks: one sentence
        return UnpackedPackage(self.folder, manifest, signature)

    def _next_file(self) -> tuple[tarfile.TarInfo, str] | None:
        """The next plain file and its name inside the one folder (a folder entry is skipped)."""
        while (member := self.tar.next()) is not None:
            path = PurePosixPath(member.name.rstrip("/"))
            parts = path.parts
            top = parts[0] if parts else ""
            if self.top is None:
                self.top = top
            elif top != self.top:
                raise BadPackageError(f"{self.archive} is not one backend folder.")
            if member.isdir() and len(parts) == 1 and top not in ("", "/", ".."):
                continue
            if (
                not member.isfile()
                or member.issparse()
                or member.name.startswith("/")
                or len(parts) != 2
                or ".." in parts
                or "\\" in member.name
                or not (parts[1] in (MANIFEST_NAME, SIGNATURE_NAME) or allowed_file_name(parts[1]))
            ):
                raise BadPackageError(
                    f"{self.archive} holds {member.name[:80]!r}, which a backend package may not."
                )
            return member, parts[1]
        return None

    def _small(self, member: tarfile.TarInfo, limit: int, name: str) -> bytes:
        if member.size > limit:
            raise BadPackageError(f"{self.archive}'s {name} is too large to be one.")
        source = self.tar.extractfile(member)
        assert source is not None  # a plain file, checked by _next_file
        return source.read()

    def _check_manifest(self, manifest: BackendManifest, expected: ExpectedPackage | None) -> None:
        if manifest.name == BUILT_IN:
            raise BadPackageError(f"A package may not be called {BUILT_IN}.")
        if expected is not None and manifest.name != expected.name:
            raise BadPackageError(
                f"{self.archive} holds the {manifest.name} backend, not the {expected.name} "
                "one the index names, so it was not installed."
            )
        if expected is not None and expected.version and manifest.version != expected.version:
            raise BadPackageError(
                f"{self.archive} is {manifest.name} {manifest.version or '(no version)'}, not "
                f"the {expected.version} the index names, so it was not installed."
            )
        here = platform_tag()
        if manifest.platform != here:
            raise BadPackageError(
                f"{self.archive} is built for {manifest.platform[:40]}, not for this machine "
                f"({here}), so it was not installed."
            )

    def _write_file(
        self, member: tarfile.TarInfo, name: str, manifest: BackendManifest, written: set[str]
    ) -> None:
        entry = manifest.files.get(name)
        if entry is None or name in written:
            what = "twice" if name in written else "but its signed manifest does not name it"
            raise BadPackageError(f"{self.archive} holds {name} {what}, so it was not installed.")
        if member.size != entry.size:
            raise BadPackageError(
                f"{self.archive} holds {name} of {member.size:,} bytes where its manifest says "
                f"{entry.size:,}, so it was not installed."
            )
        source = self.tar.extractfile(member)
        assert source is not None
        digest = hashlib.sha256()
        dest = self.folder / name
        with source, dest.open("xb") as out:
            while chunk := source.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != entry.sha256:
            raise BadPackageError(
                f"The {manifest.name} backend's files do not match its manifest: {name} does not "
                "match its sha256."
            )
        if member.mode & 0o111:
            dest.chmod(0o755)
        written.add(name)
