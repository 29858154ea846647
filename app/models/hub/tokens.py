"""The Hugging Face access token: read from HF_TOKEN, the system keyring or huggingface_hub's
token file.

Saved in the system keyring when one is there (the `keyring` package, if installed, with a
backend that really stores: not its fail or null backend); otherwise where huggingface_hub
(and `hf auth login`) keep it, $HF_TOKEN_PATH or $HF_HOME/token, with mode 0600 whatever the
umask, so other users cannot read it. It is never logged; `describe_token()` gives a masked
form for the UI. KVSTUDIO_NO_KEYRING=1 keeps the token in the file (tests, scripts).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Protocol

from app.models.hub_env import hf_home
from app.platform.atomic_write import write_atomically
from app.platform.errors import BadInputError

log = logging.getLogger(__name__)

KEYRING_SERVICE = "KV Studio"
KEYRING_USER = "huggingface-token"
NO_KEYRING_ENV = "KVSTUDIO_NO_KEYRING"


class SecretStore(Protocol):
    """What the token needs of a keyring backend (keyring.backend.KeyringBackend's methods;
    `keyring` is optional, so it is not imported for its type)."""

    def get_password(self, service: str, username: str) -> str | None: ...

    def set_password(self, service: str, username: str, password: str) -> None: ...

    def delete_password(self, service: str, username: str) -> None: ...


def token_path() -> Path:
    """Where the token file lives (read at call time, like huggingface_hub does at import)."""
    chosen = os.environ.get("HF_TOKEN_PATH")
    return Path(os.path.expanduser(chosen)) if chosen else hf_home() / "token"


def system_keyring() -> SecretStore | None:
    """The keyring backend that stores secrets here, or None (no `keyring` package, its fail
    or null backend, or KVSTUDIO_NO_KEYRING set)."""
    if os.environ.get(NO_KEYRING_ENV, "").strip() not in ("", "0"):
        return None
    try:
        import keyring
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:  # a broken backend configuration: the file still works
        log.debug("no usable keyring", exc_info=True)
        return None
    # fail.Keyring has priority 0 and null.Keyring -1: neither keeps anything.
    priority = getattr(backend, "priority", 0)
    return backend if isinstance(priority, (int, float)) and priority > 0 else None


def _keyring_token() -> str | None:
    backend = system_keyring()
    if backend is None:
        return None
    try:
        value = backend.get_password(KEYRING_SERVICE, KEYRING_USER)
    except Exception:  # a locked or unreachable keyring (no D-Bus session): read the file
        log.debug("the keyring could not be read", exc_info=True)
        return None
    return value.strip() if isinstance(value, str) and value.strip() else None


def load_token() -> str | None:
    """$HF_TOKEN (or HUGGING_FACE_HUB_TOKEN) first, then the keyring, then the token file;
    None when none holds one."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        value = (os.environ.get(name) or "").strip()
        if value:
            return value
    stored = _keyring_token()
    if stored:
        return stored
    try:
        value = token_path().read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return value or None


def save_token(token: str) -> Path | None:
    """Store `token` in the system keyring (returns None) or the token file, mode 0600,
    replacing any older one atomically (returns the file)."""
    token = token.strip()
    if not token or any(c.isspace() for c in token):
        raise BadInputError(
            "That does not look like a Hugging Face token (it must be one word, e.g. hf_...)."
        )
    backend = system_keyring()
    if backend is not None:
        try:
            backend.set_password(KEYRING_SERVICE, KEYRING_USER, token)
        except Exception:
            log.warning("The system keyring refused the token; it is kept in a private file.")
        else:
            log.info("Hugging Face token saved in the system keyring")
            return None
    path = token_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, token, mode=0o600)
    log.info("Hugging Face token saved to %s", path)
    return path


def delete_token() -> bool:
    """Remove the saved token (keyring and file); True if there was one."""
    removed = False
    backend = system_keyring()
    if backend is not None and _keyring_token() is not None:
        try:
            backend.delete_password(KEYRING_SERVICE, KEYRING_USER)
            removed = True
        except Exception:
            log.debug("the keyring could not delete the token", exc_info=True)
    try:
        token_path().unlink()
    except FileNotFoundError:
        return removed
    return True


def describe_token(token: str | None = None) -> str | None:
    """A masked form for display ('hf_…x7Qz'), never the token itself."""
    token = token if token is not None else load_token()
    if not token:
        return None
    return f"{token[:3]}…{token[-4:]}" if len(token) > 10 else "…"
