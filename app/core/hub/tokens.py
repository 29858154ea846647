"""The Hugging Face access token: read from HF_TOKEN or huggingface_hub's token file.

The token is saved where huggingface_hub (and `hf auth login`) keep it, $HF_TOKEN_PATH
or $HF_HOME/token, created with mode 0600 so other users cannot read it. It is never
logged; `describe_token()` gives a masked form for the UI.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from app.core.errors import BadInputError
from app.core.hub.env import hf_home

log = logging.getLogger(__name__)


def token_path() -> Path:
    """Where the token file lives (read at call time, like huggingface_hub does at import)."""
    chosen = os.environ.get("HF_TOKEN_PATH")
    return Path(os.path.expanduser(chosen)) if chosen else hf_home() / "token"


def load_token() -> str | None:
    """$HF_TOKEN (or HUGGING_FACE_HUB_TOKEN) first, then the token file; None when neither."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        value = (os.environ.get(name) or "").strip()
        if value:
            return value
    try:
        value = token_path().read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return value or None


def save_token(token: str) -> Path:
    """Store `token` (mode 0600, replacing any older one atomically); returns the file."""
    token = token.strip()
    if not token or any(c.isspace() for c in token):
        raise BadInputError(
            "That does not look like a Hugging Face token (it must be one word, e.g. hf_...)."
        )
    path = token_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask may have cleared bits; make it exact
        os.write(fd, token.encode("utf-8"))
    finally:
        os.close(fd)
    os.replace(tmp, path)
    log.info("Hugging Face token saved to %s", path)
    return path


def delete_token() -> bool:
    """Remove the saved token file; True if there was one."""
    try:
        token_path().unlink()
    except FileNotFoundError:
        return False
    return True


def describe_token(token: str | None = None) -> str | None:
    """A masked form for display ('hf_…x7Qz'), never the token itself."""
    token = token if token is not None else load_token()
    if not token:
        return None
    return f"{token[:3]}…{token[-4:]}" if len(token) > 10 else "…"
