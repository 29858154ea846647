"""Signatures on backend packages: ed25519 over the manifest, checked against the keys the app
trusts (app/backends/release_keys.py, plus a developer's file named in KVSTUDIO_DEV_TRUSTED_KEYS).

A package archive starts with `manifest.json` and `manifest.sig`. The manifest names every other
file with its sha256 and size, so one signature over it covers the whole package: the app checks
the signature before it unpacks anything else, then each file against the signed manifest as it
streams (app/backends/package_archive.py), and only then lets a child process load a library.

    signature = sign_manifest(private_key, manifest_bytes)    # scripts/release.py sign
    check_signature("cpu.tar.gz", manifest_bytes, sig_bytes)   # the app: who signed it, or raises
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from app.backends.manifest import SIGNATURE_NAME, BadPackageError
from app.backends.release_keys import RELEASE_KEYS
from app.platform.errors import BadInputError

log = logging.getLogger(__name__)


SIGNATURE_FORMAT = 1
MAX_SIGNATURE_BYTES = 4096
# What is signed: this line, then the manifest's bytes exactly as they are in the archive. The
# prefix keeps a signature over a manifest from meaning anything anywhere else.
SIGNED_PREFIX = b"kvstudio backend manifest v1\n"
# A developer setting: a file of extra public keys (lines as `scripts/release.py keygen` prints
# them). Tests and people who sign their own builds use it; docs/packages.md says what it means.
DEV_KEYS_ENV = "KVSTUDIO_DEV_TRUSTED_KEYS"


class UnsignedPackageError(BadPackageError):
    """The package carries no signature (`--allow-unsigned` installs it anyway)."""


class SignatureError(BadPackageError):
    """The signature is not valid, or made with a key this app does not trust."""


@dataclass(frozen=True)
class TrustedKey:
    key_id: str  # first 16 hex digits of the raw public key's sha256
    public: bytes  # 32 raw bytes
    name: str  # "kvstudio-release-1"
    source: str  # "built in" or the developer file's path


@dataclass(frozen=True)
class Signature:
    key_id: str
    value: bytes  # 64 bytes

    def to_json(self) -> str:
        data = {
            "format": SIGNATURE_FORMAT,
            "algorithm": "ed25519",
            "key": self.key_id,
            "signature": base64.b64encode(self.value).decode("ascii"),
        }
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True)
class SignatureCheck:
    """Who signed a package: a trusted key, or nobody (installed with --allow-unsigned)."""

    key: TrustedKey | None

    def describe(self) -> str:
        if self.key is None:
            return "not signed (installed with --allow-unsigned)"
        where = "" if self.key.source == "built in" else f", a developer key from {DEV_KEYS_ENV}"
        return f"signed with {self.key.name} ({self.key.key_id}{where})"


def key_id(public: bytes) -> str:
    return hashlib.sha256(public).hexdigest()[:16]


def public_bytes(private_key: Ed25519PrivateKey) -> bytes:
    return private_key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )


def public_key_line(private_key: Ed25519PrivateKey, name: str) -> str:
    """The line that makes the app trust this key: `ed25519 <base64 public key> <name>`."""
    encoded = base64.b64encode(public_bytes(private_key)).decode("ascii")
    return f"ed25519 {encoded} {name}"


def public_key_pem(key: TrustedKey) -> str:
    """The key as a PEM public key, the form `openssl pkeyutl -verify` reads."""
    public = Ed25519PublicKey.from_public_bytes(key.public)
    return public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


def private_key_pem(private_key: Ed25519PrivateKey) -> bytes:
    return private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def load_private_key(pem: bytes) -> Ed25519PrivateKey:
    """An ed25519 private key from its PKCS8 PEM text (the release secret)."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError):
        raise BadInputError("The signing key is not an unencrypted PEM private key.") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BadInputError("The signing key is not an ed25519 key.")
    return key


def parse_key_lines(text: str, source: str) -> list[TrustedKey]:
    """Keys from `ed25519 <base64> <name>` lines (blank lines and # comments skipped)."""
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        try:
            public = base64.b64decode(words[1], validate=True) if len(words) >= 2 else b""
        except binascii.Error:
            public = b""
        if words[0] != "ed25519" or len(public) != 32:
            raise BadInputError(
                f"Line {number} of {source} is not `ed25519 <base64 public key> <name>`."
            )
        name = " ".join(words[2:]) or f"key {key_id(public)}"
        keys.append(TrustedKey(key_id(public), public, name, source))
    return keys


def trusted_keys() -> list[TrustedKey]:
    """The release keys the app ships, then the developer file's keys when the variable is set."""
    keys = parse_key_lines(RELEASE_KEYS, "built in")
    dev_file = os.environ.get(DEV_KEYS_ENV)
    if dev_file:
        try:
            text = Path(dev_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            raise BadInputError(
                f"{DEV_KEYS_ENV} names {dev_file[:200]}, which cannot be read as a key file."
            ) from None
        keys += parse_key_lines(text, dev_file)
    return keys


def sign_manifest(private_key: Ed25519PrivateKey, manifest: bytes) -> Signature:
    return Signature(key_id(public_bytes(private_key)), private_key.sign(SIGNED_PREFIX + manifest))


def parse_signature(package: str, data: bytes) -> Signature:
    try:
        raw = json.loads(data.decode("utf-8"))
        value = base64.b64decode(raw["signature"], validate=True)
        key = raw["key"]
        valid = (
            raw.get("format") == SIGNATURE_FORMAT
            and raw.get("algorithm") == "ed25519"
            and isinstance(key, str)
            and len(value) == 64
        )
    except (ValueError, KeyError, TypeError, binascii.Error):
        valid = False
    if not valid:
        raise SignatureError(f"{package}'s {SIGNATURE_NAME} is not an ed25519 signature file.")
    return Signature(key, value)


def check_signature(
    package: str, manifest: bytes, signature: bytes | None, *, allow_unsigned: bool = False
) -> SignatureCheck:
    """Who signed `manifest`; one sentence (UnsignedPackageError, SignatureError) when no key the
    app trusts did, unless the package is unsigned and `allow_unsigned` says to take it."""
    if signature is None:
        if allow_unsigned:
            log.warning("%s is not signed; installed as --allow-unsigned asked", package)
            return SignatureCheck(None)
        raise UnsignedPackageError(
            f"{package} is not signed, so it was not installed; a package you built yourself "
            "can be installed with --allow-unsigned."
        )
    parsed = parse_signature(package, signature)
    keys = {key.key_id: key for key in trusted_keys()}
    key = keys.get(parsed.key_id)
    if key is None:
        raise SignatureError(
            f"{package} is signed with key {parsed.key_id[:16]}, which this app does not trust, "
            "so it was not installed."
        )
    try:
        public = Ed25519PublicKey.from_public_bytes(key.public)
        public.verify(parsed.value, SIGNED_PREFIX + manifest)
    except InvalidSignature:
        raise SignatureError(
            f"{package}'s manifest does not match its signature (it was changed after it was "
            "signed), so it was not installed."
        ) from None
    if key.source != "built in":
        log.info("%s is signed with the developer key %s from %s", package, key.name, key.source)
    return SignatureCheck(key)
