"""The release steps (the tag, backend packages, the signed SHA256SUMS), one subcommand each;
.github/workflows/release.yml runs exactly these, and they run here too
(tests/packaging/test_release.py takes the CPU package through sign, index, sums and an install
from a local server; scripts/test_builds.py runs `build cpu` before every test run).

    python scripts/release.py check-tag v0.2.0
    python scripts/release.py keygen --out KEY.pem --name kvstudio-release-2
    python scripts/release.py build cpu --out dist/backends [--root ROOT]
    python scripts/release.py sign dist/backends/*.tar.gz --version 0.2.0 --out dist/signed
    python scripts/release.py index dist/signed/*.tar.gz --base-url URL --out dist/backends.json
    python scripts/release.py sums dist/signed/* dist/installers/* dist/backends.json --out dist
    python scripts/release.py public-key

`check-tag` refuses a tag that is not `v` and the app's version (app/__init__.py), which names
the installers: a release's packages and installers carry one version.

`sums` writes SHA256SUMS (`sha256sum --check` reads it) for every asset of the release, and
SHA256SUMS.sig, the release key's raw ed25519 signature over that file, which `openssl pkeyutl
-verify` checks against the PEM that `public-key` prints (docs/packages.md shows both).

`sign` writes the release's version into each manifest and signs it, reading the private key
from --key (a PEM file) or from the KVSTUDIO_RELEASE_KEY variable (the PEM text: in CI, the
repository secret). Each step says what it wrote, or one sentence on
stderr and exit 2.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import sys
import tarfile
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from app import __version__  # noqa: E402
from app.backends.manifest import (  # noqa: E402
    MANIFEST_NAME,
    SIGNATURE_NAME,
    VERSION,
    BackendManifest,
    check_files,
    parse_manifest,
)
from app.backends.package_index import IndexEntry, index_json  # noqa: E402
from app.backends.release_keys import RELEASE_KEYS  # noqa: E402
from app.backends.signing import (  # noqa: E402
    load_private_key,
    parse_key_lines,
    parse_signature,
    private_key_pem,
    public_key_line,
    public_key_pem,
    sign_manifest,
)
from app.platform.errors import BadInputError  # noqa: E402

KEY_ENV = "KVSTUDIO_RELEASE_KEY"
SUMS_NAME = "SHA256SUMS"
SUMS_SIGNATURE_NAME = "SHA256SUMS.sig"


def check_tag(tag: str) -> str:
    """The version the tag releases, when it is the app's own; one sentence otherwise."""
    if tag != f"v{__version__}":
        raise BadInputError(
            f"The tag {tag[:40]} does not match the app's version {__version__} "
            f"(app/__init__.py); tag v{__version__} or raise the version first."
        )
    return __version__


def keygen(out: Path, name: str) -> str:
    """A new signing key in `out` (mode 0600); returns the line release_keys.py needs."""
    if out.exists():
        raise BadInputError(f"{out} exists; a key is never overwritten.")
    key = Ed25519PrivateKey.generate()
    out.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as f:
        f.write(private_key_pem(key))
    return public_key_line(key, name)


def build(variant_name: str, out: Path, root: Path | None, jobs: int) -> Path:
    """kernels/package's build of one variant (with the kernel patches, for CUDA and HIP)."""
    from kernels.package import PackageBuildError, archive_name, build_package
    from kernels.variants import variant

    try:
        chosen = variant(variant_name)
        build_package(chosen, out, root=root, jobs=jobs)
    except (ValueError, PackageBuildError) as error:
        raise BadInputError(str(error)) from None
    return out / archive_name(variant_name)


def read_key(path: Path | None) -> Ed25519PrivateKey:
    if path is not None:
        try:
            return load_private_key(path.read_bytes())
        except OSError:
            raise BadInputError(f"The signing key {path} cannot be read.") from None
    pem = os.environ.get(KEY_ENV)
    if not pem:
        raise BadInputError(f"Give the signing key with --key or in {KEY_ENV}.")
    return load_private_key(pem.encode())


def unpack_own(archive: Path, dest: Path) -> Path:
    """A package archive this release built: its one folder, unpacked and checked against its
    manifest (tarfile's data filter: no links out, no odd files)."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            tops = {Path(m.name).parts[0] for m in tar.getmembers()}
            if len(tops) != 1:
                raise BadInputError(f"{archive.name} is not one package folder.")
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, OSError, EOFError):
        raise BadInputError(f"{archive} is not a package archive.") from None
    folder = dest / tops.pop()
    manifest = parse_manifest((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    check_files(folder, manifest)
    return folder


def sign(archive: Path, key: Ed25519PrivateKey, version: str, out: Path) -> Path:
    """The archive again in `out`: its manifest with the release's version, and manifest.sig
    beside it, both first."""
    from kernels.package import write_archive

    if not VERSION.match(version):
        raise BadInputError(f"{version[:40]!r} is not a release number such as 0.2.0.")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvstudio-sign-") as scratch:
        folder = unpack_own(archive, Path(scratch))
        released = replace(parse_manifest((folder / MANIFEST_NAME).read_text()), version=version)
        (folder / MANIFEST_NAME).write_text(released.to_json(), encoding="utf-8")
        manifest = (folder / MANIFEST_NAME).read_bytes()
        (folder / SIGNATURE_NAME).write_text(sign_manifest(key, manifest).to_json())
        signed = out / archive.name
        write_archive(folder, signed)
    return signed


def read_head(archive: Path) -> tuple[BackendManifest, bytes, bytes]:
    """The manifest, its bytes and its signature's bytes: the archive's first two members."""
    with tarfile.open(archive, "r|gz") as tar:
        head = []
        for member in tar:
            source = tar.extractfile(member)
            head.append((Path(member.name).name, source.read() if source else b""))
            if len(head) == 2:
                break
    names = [name for name, _ in head]
    if names != [MANIFEST_NAME, SIGNATURE_NAME]:
        raise BadInputError(f"{archive.name} does not start with its manifest and signature.")
    manifest_bytes, signature_bytes = head[0][1], head[1][1]
    return parse_manifest(manifest_bytes.decode("utf-8")), manifest_bytes, signature_bytes


def index_entry(archive: Path, base_url: str) -> IndexEntry:
    """The index's entry for a signed archive: what its manifest says, its sha256 and size."""
    manifest, _manifest_bytes, signature_bytes = read_head(archive)
    signature = parse_signature(archive.name, signature_bytes)
    if not manifest.version:
        raise BadInputError(f"{archive.name} has no version; sign it with --version.")
    return IndexEntry(
        variant=manifest.name,
        version=manifest.version,
        platform=manifest.platform,
        targets=manifest.gpu_targets,
        kernel=manifest.kernel,
        summary=manifest.summary,
        sha256=file_sha256(archive),
        size=archive.stat().st_size,
        key=signature.key_id,
        signature=base64.b64encode(signature.value).decode("ascii"),
        url=f"{base_url.rstrip('/')}/{archive.name}" if base_url else archive.name,
    )


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def sums(files: list[Path], key: Ed25519PrivateKey, out: Path) -> Path:
    """SHA256SUMS for `files` in `out` (one `<sha256>  <name>` line each, sorted by name), and
    SHA256SUMS.sig beside it. The signature is over the file's bytes alone, so openssl checks it
    as it is; it cannot pass for a manifest's, whose signed text starts with the manifest line."""
    names: dict[str, Path] = {}
    for path in files:
        if not path.is_file():
            raise BadInputError(f"{path} is not a file, so it cannot be listed in {SUMS_NAME}.")
        if path.name in names or path.name in (SUMS_NAME, SUMS_SIGNATURE_NAME):
            raise BadInputError(f"Two assets are named {path.name}; a release lists each once.")
        names[path.name] = path
    text = "".join(f"{file_sha256(names[name])}  {name}\n" for name in sorted(names))
    out.mkdir(parents=True, exist_ok=True)
    (out / SUMS_NAME).write_text(text, encoding="utf-8")
    (out / SUMS_SIGNATURE_NAME).write_bytes(key.sign(text.encode("utf-8")))
    return out / SUMS_NAME


def public_keys_text() -> str:
    """Each key the app trusts as a PEM public key, under its name and id."""
    keys = parse_key_lines(RELEASE_KEYS, "built in")
    return "\n".join(f"# {k.name} (key id {k.key_id})\n{public_key_pem(k)}" for k in keys)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="release.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    tag = sub.add_parser("check-tag", help="refuse a tag that is not v<the app's version>")
    tag.add_argument("tag")
    gen = sub.add_parser("keygen", help="make a signing key; prints the line for release_keys.py")
    gen.add_argument("--out", type=Path, required=True)
    gen.add_argument("--name", required=True)
    make = sub.add_parser("build", help="build one variant's package (kernels/package.py)")
    make.add_argument("variant")
    make.add_argument("--out", type=Path, default=Path("dist/backends"))
    make.add_argument("--root", type=Path, help="build inside this Debian root (chroot)")
    make.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    signing = sub.add_parser("sign", help="sign package archives")
    signing.add_argument("archives", type=Path, nargs="+")
    signing.add_argument("--version", required=True, help="the release, such as 0.2.0")
    signing.add_argument("--key", type=Path, help=f"PEM file (default: ${KEY_ENV})")
    signing.add_argument("--out", type=Path, required=True)
    index = sub.add_parser("index", help="write backends.json for signed archives")
    index.add_argument("archives", type=Path, nargs="+")
    index.add_argument("--base-url", default="", help="where the archives are published")
    index.add_argument("--out", type=Path, required=True)
    listing = sub.add_parser("sums", help=f"write {SUMS_NAME} and its signature for assets")
    listing.add_argument("files", type=Path, nargs="+")
    listing.add_argument("--key", type=Path, help=f"PEM file (default: ${KEY_ENV})")
    listing.add_argument("--out", type=Path, required=True, help="the folder to write them in")
    sub.add_parser("public-key", help="print the trusted release keys as PEM (for openssl)")
    args = parser.parse_args(argv)
    try:
        if args.step == "check-tag":
            print(f"{args.tag} releases version {check_tag(args.tag)}.")
        elif args.step == "keygen":
            print(keygen(args.out, args.name))
        elif args.step == "build":
            print(build(args.variant, args.out, args.root, args.jobs))
        elif args.step == "sign":
            key = read_key(args.key)
            for archive in args.archives:
                print(sign(archive, key, args.version, args.out))
        elif args.step == "sums":
            written = sums(args.files, read_key(args.key), args.out)
            print(f"{written} and {SUMS_SIGNATURE_NAME}: {len(args.files)} files")
        elif args.step == "public-key":
            print(public_keys_text(), end="")
        else:
            entries = [index_entry(a, args.base_url) for a in args.archives]
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(index_json(entries), encoding="utf-8")
            print(f"{args.out}: {', '.join(e.describe() for e in entries)}")
    except BadInputError as error:
        print(f"release.py: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
