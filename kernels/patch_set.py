"""Our changes to llama.cpp's CUDA/HIP Flash Attention kernels, as a numbered patch set.

The patches live in `kernels/patches/NNNN-name.patch` (unified diffs against the llama.cpp
vendored in the pinned llama-cpp-python sdist, paths relative to llama.cpp's root). Every build
of a backend applies them in order (`python -m kernels build`, `python -m kernels package`), the
tuning script applies the first N of them, and the backend records which ones it carries: its
kernel version, e.g. "kvstudio-fa.3" for the first three.

The applier is plain Python (no `patch` or `git` needed) and strict: each hunk must match the
source exactly, at its line or, failing that, at exactly one other place, or nothing is written.

    python3 -m kernels.patch_set apply LLAMA_CPP_OR_SDIST_DIR [N [EXTRA.patch ...]]
    python3 -m kernels.patch_set version N [EXTRA.patch ...]
    python3 -m kernels.patch_set list

EXTRA is one more patch applied after the first N, an experiment kept outside kernels/patches (the
device scripts' XPATCH), or several applied in order, each on top of the one before; the kernel
version printed is that of the N with the (last) experiment's tag after a "+"
(kvstudio-fa.7+run32-vec-v8-candidate-b), so that a build with it never passes for a shipped
kernel, nor for llama.cpp's own.
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

PATCH_DIR = Path(__file__).resolve().parent / "patches"
VERSION_PREFIX = "kvstudio-fa"
UPSTREAM = "upstream"  # the kernel version of a build without our patches
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """A patch that does not apply: one sentence naming the patch, the file and the place."""


@dataclass(frozen=True)
class Hunk:
    old_start: int  # 1-based line of the first old line
    old: tuple[str, ...]
    new: tuple[str, ...]


@dataclass(frozen=True)
class FilePatch:
    path: str  # relative to llama.cpp's root
    hunks: tuple[Hunk, ...]


@dataclass(frozen=True)
class Patch:
    number: int
    name: str  # "0002-fattn-vec-q8_0-k-aligned-loads"
    summary: str  # the first line of the description above the diff
    files: tuple[FilePatch, ...]


def patch_files() -> list[Path]:
    return sorted(PATCH_DIR.glob("[0-9][0-9][0-9][0-9]-*.patch"))


def load_patches() -> list[Patch]:
    patches = [parse(path.read_text(encoding="utf-8"), path.stem) for path in patch_files()]
    for expected, patch in enumerate(patches, start=1):
        if patch.number != expected:
            raise PatchError(f"{patch.name}: the patch set skips number {expected}.")
    return patches


def kernel_version(count: int | None = None) -> str:
    """The version a build with the first `count` patches (default: all) carries."""
    total = len(patch_files())
    count = total if count is None else count
    return UPSTREAM if count == 0 else f"{VERSION_PREFIX}.{count}"


def experiment_version(count: int, *extras: Path) -> str:
    """The version of a build with the first `count` patches and the experiments `extras`: the
    kernel version, "+", and the last experiment's file name without its date and suffixes, cut to
    24 characters (the app shows a kernel version in at most 40; an experiment stacked on others
    says so in its file); without an experiment, the kernel version."""
    if not extras:
        return kernel_version(count)
    stem = extras[-1].name.lower().removesuffix(".txt").removesuffix(".patch")
    tag = re.sub(r"[^a-z0-9.-]", "-", re.sub(r"^\d{4}-\d{2}-\d{2}-", "", stem))[:24].strip("-.")
    return f"{kernel_version(count)}+{tag or 'experiment'}"


def patch_set_sha256(count: int | None = None) -> str:
    """One hash over the patches a build applies, so a changed patch is a different build."""
    digest = hashlib.sha256()
    for path in patch_files()[:count]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def parse(text: str, name: str) -> Patch:
    lines = text.splitlines()
    number = int(name[:4]) if name[:4].isdigit() else 0
    summary = next((line.strip() for line in lines if line.strip()), "")
    files: list[FilePatch] = []
    path: str | None = None
    hunks: list[Hunk] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- "):
            if path is not None:
                files.append(FilePatch(path, tuple(hunks)))
            if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ b/"):
                raise PatchError(f"{name}: line {i + 2} should name the patched file (+++ b/...).")
            path, hunks = lines[i + 1][len("+++ b/") :].strip(), []
            i += 2
            continue
        match = _HUNK.match(line)
        if match:
            if path is None:
                raise PatchError(f"{name}: a hunk at line {i + 1} comes before any file name.")
            hunk, i = _read_hunk(lines, i + 1, match, name)
            hunks.append(hunk)
            continue
        i += 1
    if path is not None:
        files.append(FilePatch(path, tuple(hunks)))
    if not files:
        raise PatchError(f"{name}: no file changes found in the patch.")
    return Patch(number, name, summary, tuple(files))


def _read_hunk(lines: list[str], i: int, match: re.Match[str], name: str) -> tuple[Hunk, int]:
    old_count = int(match.group(2) or 1)
    new_count = int(match.group(4) or 1)
    old: list[str] = []
    new: list[str] = []
    while len(old) < old_count or len(new) < new_count:
        if i >= len(lines):
            raise PatchError(f"{name}: the hunk at {match.group(0)} ends early.")
        line = lines[i]
        tag, body = (line[:1], line[1:]) if line else (" ", "")
        if tag == " ":
            old.append(body)
            new.append(body)
        elif tag == "-":
            old.append(body)
        elif tag == "+":
            new.append(body)
        elif tag != "\\":  # "\ No newline at end of file"
            raise PatchError(f"{name}: unexpected line {i + 1} in the hunk at {match.group(0)}.")
        i += 1
    return Hunk(int(match.group(1)), tuple(old), tuple(new)), i


def llama_cpp_root(folder: Path) -> Path:
    """llama.cpp's root in an unpacked llama-cpp-python sdist, or the folder itself."""
    vendored = folder / "vendor" / "llama.cpp"
    return vendored if (vendored / "ggml").is_dir() else folder


def apply(folder: Path, count: int | None = None, *extras: Path) -> list[Patch]:
    """Apply the first `count` patches (default: all) to llama.cpp in `folder`, then the patch
    files `extras` in order (experiments kept outside kernels/patches); all or nothing."""
    root = llama_cpp_root(folder)
    patches = load_patches()[:count]
    patches += [parse(extra.read_text(encoding="utf-8"), extra.stem) for extra in extras]
    edited: dict[Path, list[str]] = {}
    for patch in patches:
        for file_patch in patch.files:
            target = root / file_patch.path
            if target not in edited:
                if not target.is_file():
                    raise PatchError(f"{patch.name}: {file_patch.path} is not in {root}.")
                edited[target] = target.read_text(encoding="utf-8").split("\n")
            edited[target] = _apply_file(edited[target], file_patch, patch.name)
    for target, text_lines in edited.items():
        target.write_text("\n".join(text_lines), encoding="utf-8")
    return patches


def _apply_file(text: list[str], file_patch: FilePatch, name: str) -> list[str]:
    shift = 0  # how far earlier hunks moved the lines below them
    for hunk in file_patch.hunks:
        at = _find(text, hunk, hunk.old_start - 1 + shift)
        if at is None:
            raise PatchError(
                f"{name}: {file_patch.path} around line {hunk.old_start} is not the source this "
                "patch was made for (already patched, or another llama.cpp version)."
            )
        text = text[:at] + list(hunk.new) + text[at + len(hunk.old) :]
        shift = at - (hunk.old_start - 1) + len(hunk.new) - len(hunk.old)
    return text


def _find(text: list[str], hunk: Hunk, expected: int) -> int | None:
    size = len(hunk.old)
    if text[expected : expected + size] == list(hunk.old):
        return expected
    places = [i for i in range(len(text) - size + 1) if text[i : i + size] == list(hunk.old)]
    return places[0] if len(places) == 1 else None


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["list"]:
            for patch in load_patches():
                print(f"{patch.name}: {patch.summary}")
            return 0
        if argv[:1] == ["apply"] and len(argv) >= 2:
            count = int(argv[2]) if len(argv) >= 3 else None
            extras = [Path(name) for name in argv[3:]]
            applied = apply(Path(argv[1]), count, *extras)
            version = experiment_version(len(applied) - len(extras), *extras)
            print(f"applied {', '.join(p.name for p in applied) or 'no patch'}: kernel {version}")
            return 0
        if argv[:1] == ["version"] and len(argv) >= 2:
            print(experiment_version(int(argv[1]), *(Path(name) for name in argv[2:])))
            return 0
    except PatchError as error:
        print(f"kernels: {error}", file=sys.stderr)
        return 2
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
