"""The backends a user has installed, and which one the engine runs.

"built-in" is the llama.cpp that came with llama-cpp-python (pip-built; the fallback, always
there). Other backends are packages (app/backends/manifest.py) unpacked into
<data folder>/backends/<name>/. The choice is a setting; the engine process is started with
llama-cpp-python's LLAMA_CPP_LIB_PATH and MTMD_CPP_LIB pointing at the chosen folder, so the
GUI and every CLI command run the same backend.

Adding or switching is all-or-nothing: the archive's signature is checked and it is unpacked
beside the library with every file checked against its signed manifest as it streams
(app/backends/package_archive.py); only then is it loaded once in a child process (`probe`),
before it replaces anything or becomes the choice; on any failure the previous backend stays in
use.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from app.backends.built_in import built_in_folder
from app.backends.manifest import (
    BackendManifest,
    BadPackageError,
    check_files,
    read_manifest,
    sha256_file,
)
from app.backends.package_archive import ExpectedPackage, unpack_package
from app.platform.atomic_write import write_atomically
from app.platform.errors import BadInputError
from app.platform.paths import settings_path
from app.state.settings import SettingsFile

if TYPE_CHECKING:
    from app.state.settings import SettingsFile

log = logging.getLogger(__name__)

BUILT_IN = "built-in"
BACKENDS_FOLDER = "backends"
STAMPS_FILE = ".verified.json"

Probe = Callable[[Path | None], object]  # loads the backend in a child process; raises if it cannot
# What `use` hashed: {backend folder: {file: [size, mtime_ns]}}, as _stamp writes it.
Stamps = dict[str, dict[str, list[int]]]


@dataclass(frozen=True)
class InstalledBackend:
    name: str
    folder: Path | None  # None: the built-in one
    manifest: BackendManifest | None
    problem: str | None = None  # why it cannot be used, for a damaged package


def library_folder(backend: InstalledBackend) -> Path | None:
    """Where `backend`'s libraries (and rpc-server) are: its package folder, or the built-in
    one's."""
    return backend.folder if backend.folder is not None else built_in_folder()


def library_env(folder: Path | None) -> dict[str, str]:
    """The environment that makes llama-cpp-python load `folder`'s libraries (None: its own)."""
    if folder is None:
        return {}
    return {"LLAMA_CPP_LIB_PATH": str(folder), "MTMD_CPP_LIB": str(folder)}


def load_chosen_backend_here(data_folder: Path) -> tuple[InstalledBackend, str | None]:
    """For a process that imports llama_cpp itself (`kvstudio doctor`, `kernels verify`): put the
    chosen backend's library variables in os.environ, where llama_cpp reads them on import.
    Returns what for_engine() does. Imports no numpy, so llama_cpp can still come first."""
    backend, notice = BackendStore(data_folder).for_engine()
    os.environ.update(library_env(backend.folder))
    return backend, notice


class BackendStore:
    """The backends folder of one data folder, and the chosen backend (a setting)."""

    def __init__(self, data_folder: Path, settings: SettingsFile | None = None) -> None:
        """`settings`: the app's own SettingsFile when it has one open, so a change made here
        is not overwritten by its next save (it writes the whole file)."""
        self.data_folder = data_folder
        self.folder = data_folder / BACKENDS_FOLDER
        self._settings = settings

    # ---- what is there -------------------------------------------------------------------

    def installed(self) -> list[InstalledBackend]:
        backends = [InstalledBackend(BUILT_IN, None, None)]
        if not self.folder.is_dir():
            return backends
        for folder in sorted(self.folder.iterdir()):
            if not folder.is_dir() or folder.name.startswith("."):
                continue  # .partial-* folders of an add in progress
            try:
                manifest = read_manifest(folder)
                check_files(folder, manifest, full=False)
                backends.append(InstalledBackend(folder.name, folder, manifest))
            except BadPackageError as error:
                backends.append(InstalledBackend(folder.name, folder, None, str(error)))
        return backends

    def get(self, name: str) -> InstalledBackend:
        for backend in self.installed():
            if backend.name == name:
                return backend
        names = ", ".join(b.name for b in self.installed())
        raise BadInputError(f"No backend named '{name[:60]}' is installed (installed: {names}).")

    def chosen_name(self) -> str:
        if self._settings is not None:
            return self._settings.settings.backend
        return _backend_setting(self.data_folder)

    def for_engine(self) -> tuple[InstalledBackend, str | None]:
        """The backend the next engine runs, and a sentence when the chosen one cannot run
        (then the built-in one is used). A file whose size and modification time are what they
        were when `use` hashed it is not hashed again (a GPU library would cost seconds at each
        start); any other file is."""
        name = self.chosen_name()
        if name == BUILT_IN:
            return InstalledBackend(BUILT_IN, None, None), None
        try:
            backend = self.get(name)
            if backend.problem:
                raise BadPackageError(backend.problem)
            assert backend.folder is not None and backend.manifest is not None
            self._check_since_verified(backend.folder, backend.manifest)
        except BadInputError as error:  # BadPackageError included
            return InstalledBackend(BUILT_IN, None, None), (
                f"{error} The engine runs the built-in backend instead."
            )
        return backend, None

    # ---- changing it -----------------------------------------------------------------------

    def use(self, name: str, probe: Probe) -> InstalledBackend:
        """Make `name` the engine's backend after checking every file and loading it once."""
        backend = self.get(name)
        if backend.problem:
            raise BadPackageError(backend.problem)
        if backend.folder is not None and backend.manifest is not None:
            check_files(backend.folder, backend.manifest)
        probe(backend.folder)
        if backend.folder is not None:
            self._stamp(backend.folder)
        self._remember(name)
        return backend

    # What `use` hashed (Stamps): files unchanged since need no hash.
    def _stamps(self) -> Stamps:
        try:
            data = json.loads((self.folder / STAMPS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        # the app's own file: read as the shape _stamp writes
        return cast(Stamps, data) if isinstance(data, dict) else {}

    def _stamp(self, folder: Path) -> None:
        stamps = self._stamps()
        stamps[folder.name] = {
            p.name: [p.stat().st_size, p.stat().st_mtime_ns] for p in sorted(folder.iterdir())
        }
        write_atomically(self.folder / STAMPS_FILE, json.dumps(stamps, indent=1))

    def _check_since_verified(self, folder: Path, manifest: BackendManifest) -> None:
        stamped = self._stamps().get(folder.name, {})
        check_files(folder, manifest, full=False)
        for name, entry in manifest.files.items():
            stat = (folder / name).stat()
            if stamped.get(name) != [stat.st_size, stat.st_mtime_ns]:
                if sha256_file(folder / name) != entry.sha256:
                    raise BadPackageError(
                        f"The {manifest.name} backend's {name} changed since it was verified."
                    )

    def add(
        self,
        archive: Path,
        probe: Probe,
        *,
        allow_unsigned: bool = False,
        expected: ExpectedPackage | None = None,
    ) -> InstalledBackend:
        """Install a package archive (.tar.gz of one folder). Its signature, names, sizes and
        every file's sha256 are checked while it is unpacked into a hidden staging folder
        (package_archive.unpack_package); only then does `probe` load it, in a child process.
        Replaces an installed package of the same name only once the new one is checked and
        loads. `expected`: what the index said the archive is."""
        if not archive.is_file():
            raise BadInputError(f"{archive} is not a file.")
        self.folder.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=self.folder))
        try:
            package = unpack_package(
                archive, staging, allow_unsigned=allow_unsigned, expected=expected
            )
            manifest = package.manifest
            # Under its own name, so the probe's messages name it.
            unpacked = package.folder.rename(staging / manifest.name)
            # The first code of the package that runs, in a throwaway process: every file was
            # checked against the signed manifest above.
            probe(unpacked)
            target = self.folder / manifest.name
            # Renaming over a folder whose libraries a running engine has mapped is safe on
            # Linux and macOS: the engine keeps the old files until it exits.
            old = None
            if target.exists():
                old = self.folder / f".old-{manifest.name}"
                shutil.rmtree(old, ignore_errors=True)
                os.replace(target, old)
            os.replace(unpacked, target)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
            return InstalledBackend(manifest.name, target, manifest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def remove(self, name: str) -> None:
        backend = self.get(name)
        if backend.folder is None:
            raise BadInputError("The built-in backend cannot be removed.")
        if self.chosen_name() == name:
            self._remember(BUILT_IN)
        shutil.rmtree(backend.folder)

    def _remember(self, name: str) -> None:
        (self._settings or SettingsFile(self.data_folder)).update(backend=name)


def _backend_setting(data_folder: Path) -> str:
    """The `backend` setting alone, read from settings.json without app.state.settings: that module
    imports gguf and so numpy, and a process that then imports llama_cpp (doctor, kernels verify)
    must import llama_cpp first (docs/llama-cpp-notes.md). A file the settings code would reset
    reads as the built-in backend here too."""
    try:
        raw = json.loads(settings_path(data_folder).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return BUILT_IN
    value = raw.get("backend") if isinstance(raw, dict) else None
    return value if isinstance(value, str) and value else BUILT_IN
