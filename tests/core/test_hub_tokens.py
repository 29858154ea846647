"""The Hugging Face token: stored 0600 where huggingface_hub looks, never shown again."""

from __future__ import annotations

import logging
import os

import pytest

from app.models.hub import delete_token, describe_token, load_token, save_token, token_path
from app.platform.errors import BadInputError


def test_saved_token_is_private_and_read_back(hub_env, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    old_umask = os.umask(0)  # even with a permissive umask the file is 0600
    try:
        path = save_token("  hf_abcdefghijklmnop  ")
    finally:
        os.umask(old_umask)
    assert path == token_path()
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_token() == "hf_abcdefghijklmnop"
    assert describe_token() == "hf_…mnop"
    assert "hf_abcdefghijklmnop" not in caplog.text


def test_environment_token_wins_and_huggingface_hub_reads_the_same_file(
    hub_env, monkeypatch
) -> None:
    save_token("hf_from_file_0001")
    from huggingface_hub.utils import _auth

    monkeypatch.setattr(_auth.constants, "HF_TOKEN_PATH", str(token_path()))
    assert _auth._get_token_from_file() == "hf_from_file_0001"
    monkeypatch.setenv("HF_TOKEN", "hf_from_env_0002")
    assert load_token() == "hf_from_env_0002"


def test_bad_tokens_and_deleting(hub_env) -> None:
    with pytest.raises(BadInputError):
        save_token("two words")
    with pytest.raises(BadInputError):
        save_token("   ")
    assert load_token() is None and delete_token() is False
    save_token("hf_x_12345678901")
    assert delete_token() is True and load_token() is None
