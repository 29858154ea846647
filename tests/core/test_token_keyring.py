"""The token in the system keyring (issue 11, secrets and files): used when the `keyring`
package is installed and its backend keeps secrets; its fail and null backends mean the 0600
file. Skipped where `keyring` is not installed (it is in the test extra, not a dependency)."""

from __future__ import annotations

import pytest

from app.models.hub import tokens

STORED_TOKEN = "hf_CanaryFromTheStore3Vb8Kp1Wz6Yd"

keyring = pytest.importorskip("keyring")

# Asked before MemoryKeyring exists: keyring picks its default among every backend class
# defined so far, and this one would win (the tests restore this default after them).
DEFAULT_BACKEND = keyring.get_keyring()


class MemoryKeyring(keyring.backend.KeyringBackend):  # type: ignore[name-defined]  # keyring comes from importorskip
    """A keyring backend that keeps secrets in memory: the OS keyring's place in a test, used
    through the keyring package's own API."""

    priority = 1

    def __init__(self) -> None:
        super().__init__()
        self.secrets: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.secrets.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.secrets[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        del self.secrets[(service, username)]


@pytest.fixture
def os_keyring(hub_env, monkeypatch):
    monkeypatch.delenv("KVSTUDIO_NO_KEYRING")
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(DEFAULT_BACKEND)


def test_the_token_goes_to_the_system_keyring_when_there_is_one(os_keyring) -> None:
    """Failed before issue 11: the token always went to the file."""
    assert tokens.save_token(STORED_TOKEN) is None
    assert not tokens.token_path().exists()
    assert os_keyring.secrets == {(tokens.KEYRING_SERVICE, tokens.KEYRING_USER): STORED_TOKEN}
    assert tokens.load_token() == STORED_TOKEN
    assert tokens.describe_token() == "hf_…" + STORED_TOKEN[-4:]
    assert tokens.delete_token() is True and tokens.load_token() is None


def test_a_keyring_that_keeps_nothing_means_the_0600_file(hub_env, monkeypatch) -> None:
    from keyring.backends import fail, null

    monkeypatch.delenv("KVSTUDIO_NO_KEYRING")
    try:
        for backend in (fail.Keyring(), null.Keyring()):
            keyring.set_keyring(backend)
            path = tokens.save_token(STORED_TOKEN)
            assert path is not None and path.stat().st_mode & 0o777 == 0o600
            assert tokens.load_token() == STORED_TOKEN
    finally:
        keyring.set_keyring(DEFAULT_BACKEND)
