"""A backend package: one build of llama.cpp's shared libraries plus the manifest that names them.

A package is a folder (shipped as a .tar.gz of that folder) holding `libllama`, `libggml*`,
`libmtmd` (and llama.cpp's `ggml-rpc-server`, so any install can be a worker), and `manifest.json`:
what was built (variant, llama.cpp / llama-cpp-python versions, GPU targets, Flash Attention
K/V pairs), the sha256 and size of every file, and the int8 dot-instruction counts read from
the GPU library. Nothing else may be in the folder: a file the manifest does not name, a missing
one, or one whose bytes changed makes the package refused, so what runs is what was verified.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.kv.kv_types import KvMode
from app.platform.errors import BadInputError

MANIFEST_NAME = "manifest.json"
# The ed25519 signature over the manifest (app/backends/signing.py); kept beside it once installed.
SIGNATURE_NAME = "manifest.sig"
# Beside the built-in backend's libraries (llama_cpp/lib), written by `python -m kernels build`:
# the kernel version that pip build carries (a package says it in its manifest instead).
KERNEL_NOTE = "kvstudio-kernel.txt"
MANIFEST_FORMAT = 1
# The names a package may carry besides its manifest: llama.cpp's libraries and its RPC server.
_ALLOWED_FILE = re.compile(
    r"^(lib(llama|ggml[\w-]*|mtmd)\.(so|dylib)|(lib)?(llama|ggml[\w-]*|mtmd)\.dll"
    r"|(ggml-)?rpc-server(\.exe)?)$"
)
_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{0,39}$")
MAX_MANIFEST_BYTES = 1 << 20


class BadPackageError(BadInputError):
    """A package that must not be used: one sentence saying why."""


@dataclass(frozen=True)
class PackageFile:
    sha256: str
    size: int


@dataclass(frozen=True)
class BackendManifest:
    name: str  # "cpu", "rocm-rdna3", "cuda", "vulkan": also the folder name once installed
    summary: str
    platform: str  # "linux-x86_64"
    llama_cpp_python: str  # the pinned sdist the libraries were built from
    ggml_version: str
    source_sha256: str  # of that sdist
    cmake_args: tuple[str, ...]
    gpu_targets: tuple[str, ...]  # gfx1100..., CUDA architectures; () for CPU
    # K-V pairs the CUDA/HIP Flash Attention kernels are compiled for; () when the backend
    # takes every pair without build options (CPU, Vulkan).
    fa_pairs: tuple[str, ...]
    files: dict[str, PackageFile]
    # Per GPU target, per K-V pair (gfx1100, q8_0-f16: 624): int8 dot instructions in FA kernels.
    instruction_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    build: dict[str, Any] = field(default_factory=dict)  # seconds, cores, date, note
    # Which Flash Attention GPU kernels the build carries: "kvstudio-fa.5" for llama.cpp's with
    # the first 5 patches of kernels/patches, "upstream" for llama.cpp's own (and GPU packages
    # made before the field), "" where there are no CUDA/HIP kernels (CPU, Vulkan).
    kernel: str = ""
    # The release this package belongs to ("0.2.0"; "" for packages made before releases): the
    # Backends page compares it with the index's to offer an update.
    version: str = ""

    def to_json(self) -> str:
        data = asdict(self)
        data["format"] = MANIFEST_FORMAT
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    def handles_pair(self, mode: KvMode) -> bool:
        """Whether Flash Attention runs `mode` natively (no conversion to f16)."""
        return handles_pair(self.fa_pairs, mode)


def kernel_text(kernel: str) -> str:
    """The Flash Attention GPU kernels a build carries, in the user's words."""
    if not kernel:
        return "none (no CUDA/HIP kernels in this build)"
    if kernel == "upstream":
        return "llama.cpp's own (without KV Studio's kernel patches)"
    shipped, _, experiment = kernel.partition("+")
    if experiment:
        return (
            f"{shipped} with the experiment {experiment}: KV Studio's kernel patches "
            "and one not shipped"
        )
    # No speed claim here: that was measured on one GPU (docs/kernel-log.md), not on this one.
    return f"{kernel}: llama.cpp's with KV Studio's kernel patches"


def built_in_kernel(lib_folder: Path | None) -> str:
    """What the built-in backend carries: "" without a CUDA/HIP library; else its note when
    `python -m kernels build` made it, or llama.cpp's own kernels (a plain pip install)."""
    gpu_libraries = ("libggml-cuda*", "libggml-hip*")
    if lib_folder is None or not any(any(lib_folder.glob(g)) for g in gpu_libraries):
        return ""
    note = lib_folder / KERNEL_NOTE
    if note.is_file():
        text = note.read_text(encoding="utf-8", errors="replace").strip()
        # "kvstudio-fa.7", or "kvstudio-fa.7+run32-v8b" for a build with one experimental patch
        # more (scripts/fa_prompt_run.sh's XPATCH): patched either way, never llama.cpp's own.
        if re.fullmatch(r"[a-z0-9.-]{1,40}(\+[a-z0-9.-]{1,24})?", text):
            return text
    return "upstream"


def kernel_of_folder(lib_folder: Path | None) -> str:
    """The Flash Attention GPU kernels of the libraries in `lib_folder`, as kernel_text takes
    them: an installed package's manifest says it; the built-in backend's note, else llama.cpp's
    own (see built_in_kernel)."""
    if lib_folder is not None and (lib_folder / MANIFEST_NAME).is_file():
        try:
            return read_manifest(lib_folder).kernel
        except BadInputError:
            pass  # a package the app would refuse to start is not what runs; say what the files do
    return built_in_kernel(lib_folder)


def handles_pair(fa_pairs: tuple[str, ...], mode: KvMode) -> bool:
    """Whether a build with these manifest `fa_pairs` runs `mode` natively: () means every
    pair (CPU, Vulkan), "all" likewise."""
    return not fa_pairs or "all" in fa_pairs or mode.pair in fa_pairs


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def allowed_file_name(name: str) -> bool:
    return bool(_ALLOWED_FILE.match(name))


def _strings(raw: object, what: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
        raise BadPackageError(f"The manifest's {what} is not a list of names.")
    return tuple(raw)


def parse_manifest(text: str) -> BackendManifest:
    """The manifest from its JSON text; BadPackageError with one sentence when it is not one."""
    try:
        raw = json.loads(text)
    except ValueError:
        raise BadPackageError("The package's manifest.json is not valid JSON.") from None
    if not isinstance(raw, dict):
        raise BadPackageError("The package's manifest.json is not a JSON object.")
    if raw.get("format") != MANIFEST_FORMAT:
        raise BadPackageError(
            f"The package's manifest has format {raw.get('format')!r}; this app reads "
            f"format {MANIFEST_FORMAT}."
        )
    text_fields = ("name", "summary", "platform", "llama_cpp_python", "ggml_version")
    for key in (*text_fields, "source_sha256"):
        if not isinstance(raw.get(key), str):
            raise BadPackageError(f"The package's manifest has no {key}.")
    if not _NAME.match(raw["name"]):
        raise BadPackageError(
            "The package's name must be lower-case letters, digits, dots and dashes."
        )
    files_raw = raw.get("files")
    if not isinstance(files_raw, dict) or not files_raw:
        raise BadPackageError("The package's manifest lists no files.")
    files: dict[str, PackageFile] = {}
    for name, entry in files_raw.items():
        if not allowed_file_name(name):
            raise BadPackageError(
                f"The package's manifest names {name[:80]!r}, which is not a llama.cpp library."
            )
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("sha256"), str)
            or not re.fullmatch(r"[0-9a-f]{64}", entry["sha256"])
            or not isinstance(entry.get("size"), int)
            or entry["size"] < 0
        ):
            raise BadPackageError(
                f"The package's manifest has no valid sha256 and size for {name}."
            )
        files[name] = PackageFile(entry["sha256"], entry["size"])
    if "libllama.so" not in files and "libllama.dylib" not in files and "llama.dll" not in files:
        raise BadPackageError("The package holds no libllama, so it is not a llama.cpp backend.")
    counts = raw.get("instruction_counts", {})
    if not isinstance(counts, dict) or not all(
        isinstance(per, dict) and all(isinstance(n, int) for n in per.values())
        for per in counts.values()
    ):
        raise BadPackageError("The package's instruction counts are not numbers per target.")
    build = raw.get("build", {})
    return BackendManifest(
        name=raw["name"],
        summary=raw["summary"],
        platform=raw["platform"],
        llama_cpp_python=raw["llama_cpp_python"],
        ggml_version=raw["ggml_version"],
        source_sha256=raw["source_sha256"],
        cmake_args=_strings(raw.get("cmake_args", []), "CMake arguments"),
        gpu_targets=_strings(raw.get("gpu_targets", []), "GPU target list"),
        fa_pairs=_strings(raw.get("fa_pairs", []), "Flash Attention pair list"),
        files=files,
        instruction_counts={t: dict(per) for t, per in counts.items()},
        build=build if isinstance(build, dict) else {},
        kernel=_kernel(raw),
        version=_version(raw),
    )


VERSION = re.compile(r"^\d{1,6}(\.\d{1,6}){0,3}$")


def _version(raw: Mapping[str, object]) -> str:
    version = raw.get("version", "")
    if not isinstance(version, str) or (version and not VERSION.match(version)):
        raise BadPackageError("The package's version is not a release number such as 0.2.0.")
    return version


def _kernel(raw: Mapping[str, object]) -> str:
    if "kernel" not in raw:
        # Packages made before the field: a GPU one (it lists its FA pairs) has llama.cpp's own.
        return "upstream" if raw.get("fa_pairs") else ""
    kernel = raw["kernel"]
    if not isinstance(kernel, str) or not re.fullmatch(r"[a-z0-9.-]{0,40}", kernel):
        raise BadPackageError("The package's kernel version is not a short name.")
    return kernel


def read_manifest(folder: Path) -> BackendManifest:
    path = folder / MANIFEST_NAME
    if not path.is_file() or path.is_symlink():
        raise BadPackageError(
            f"{folder.name} has no manifest.json, so it is not a backend package."
        )
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise BadPackageError(f"{folder.name}'s manifest.json is too large to be a manifest.")
    return parse_manifest(path.read_text(encoding="utf-8", errors="replace"))


def file_problems(folder: Path, manifest: BackendManifest, *, full: bool = True) -> list[str]:
    """What differs between the folder and its manifest (empty: it matches). `full` hashes every
    file; without it only names and sizes are compared (a quick check before each engine start)."""
    problems = []
    present = {p.name: p for p in folder.iterdir() if p.name not in (MANIFEST_NAME, SIGNATURE_NAME)}
    for name, path in sorted(present.items()):
        if name not in manifest.files:
            problems.append(f"{name} is not in the manifest")
        elif path.is_symlink() or not path.is_file():
            problems.append(f"{name} is not a plain file")
    for name, expected in sorted(manifest.files.items()):
        found = present.get(name)
        if found is None:
            problems.append(f"{name} is missing")
        elif found.is_file() and not found.is_symlink():
            if found.stat().st_size != expected.size:
                problems.append(f"{name} has {found.stat().st_size} bytes, not {expected.size}")
            elif full and sha256_file(found) != expected.sha256:
                problems.append(f"{name} does not match its sha256")
    return problems


def check_files(folder: Path, manifest: BackendManifest, *, full: bool = True) -> None:
    """BadPackageError naming the first difference (and how many more) when the files differ."""
    problems = file_problems(folder, manifest, full=full)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BadPackageError(
            f"The {manifest.name} backend's files do not match its manifest: {problems[0]}{more}."
        )
