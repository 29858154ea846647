"""A model file that passed the checks before llama.cpp loads it is not checked again while it is
unchanged (app/models/checked_models.py): the record in the cache folder says so, the token
list is not walked again, and a real engine loads the recorded file without checking it. A
file changed since (a repeated token written in) is refused again with the same sentence; a
file changed in the last two seconds is never recorded; a refusal is never recorded; a corrupt
or unreadable record costs a check, never a load."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from app.engine.messages import Failed, Loaded
from app.engine.process import EngineProcess
from app.models import gguf_read, gguf_tokenizer, recent_headers
from app.models.checked_models import check_model_file, checks_fingerprint, record_path
from app.models.recent_headers import file_key
from app.platform.errors import InvalidGgufError
from app.platform.paths import cache_dir
from tests.engine_events import load_answer
from tests.gguf_factory import write_tiny_gguf
from tests.hostile_gguf import STRING, set_value

# Longer than the header read keeps (gguf_read.MAX_KEPT_ARRAY): walked from the file by the
# load's token-list check, as the starter's 262,144 tokens are.
WORDS = [f"\u2581w{i}" for i in range(5_000)]


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of this test's own (the engine it starts inherits it)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("KVSTUDIO_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per walk of a token list read from the file (gguf_tokenizer._token_texts)."""
    seen: list[int] = []
    walk = gguf_tokenizer._token_texts

    def counted(data: bytes) -> list[bytes]:
        seen.append(len(data))
        return walk(data)

    monkeypatch.setattr(gguf_tokenizer, "_token_texts", counted)
    return seen


def _seen_later(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Files look `seconds` old from here on, as a model downloaded earlier is (the test's
    file was just written): recent_headers' clock, whose two-second rule the record follows."""
    now = time.time()
    monkeypatch.setattr(recent_headers, "_now", lambda: now + seconds)


def _recorded(path: Path) -> bool:
    if not record_path().is_file():
        return False
    record = json.loads(record_path().read_text(encoding="utf-8"))
    return list(file_key(str(path), path.stat())) in record["files"]


def _refusal(path: Path) -> str:
    """What the checks say of `path` without any record (the load's checks before the record)."""
    with pytest.raises(InvalidGgufError) as caught:
        gguf_tokenizer.check_token_list_file(path, gguf_read.check_gguf(path))
    return str(caught.value)


def test_a_file_that_passed_is_not_walked_again_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walks: list[int]
) -> None:
    path = write_tiny_gguf(tmp_path / "long.gguf", vocab=WORDS)
    _seen_later(monkeypatch, 60)
    check_model_file(path)
    assert len(walks) == 1 and _recorded(path)
    check_model_file(path)
    check_model_file(tmp_path / "." / "long.gguf")  # the same file by another path
    assert len(walks) == 1

    write_tiny_gguf(path, vocab=[*WORDS, "\u2581one-more"])  # a new size and time
    check_model_file(path)
    assert len(walks) == 2 and _recorded(path)
    record = json.loads(record_path().read_text(encoding="utf-8"))
    assert len(record["files"]) == 1  # the earlier contents' entry is gone
    assert record["checks"] == checks_fingerprint()


def test_a_file_changed_in_the_last_two_seconds_is_checked_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walks: list[int]
) -> None:
    """Within one clock tick a same-size rewrite keeps size and times: only a file settled for
    two seconds is recorded, as recent_headers keeps only such a file's header."""
    path = write_tiny_gguf(tmp_path / "long.gguf", vocab=WORDS)
    _seen_later(monkeypatch, 1)
    check_model_file(path)
    check_model_file(path)
    assert len(walks) == 2 and not _recorded(path)
    _seen_later(monkeypatch, 3)
    check_model_file(path)
    check_model_file(path)
    assert len(walks) == 3 and _recorded(path)


def test_a_refused_file_is_refused_every_time_and_never_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walks: list[int]
) -> None:
    words = [*WORDS]
    words[-1] = words[17]
    path = write_tiny_gguf(tmp_path / "repeated.gguf", vocab=words)
    _seen_later(monkeypatch, 60)
    sentences = set()
    for _ in range(2):
        with pytest.raises(InvalidGgufError) as caught:
            check_model_file(path)
        sentences.add(str(caught.value))
    assert len(walks) == 2 and not record_path().exists()
    assert sentences == {_refusal(path)} and "twice in its vocabulary" in _refusal(path)


@pytest.mark.parametrize(
    "record",
    [
        b"\xff\xfe not text",
        b'{"checks": "',
        b"[]",
        b'{"checks": 1, "files": 3}',
        b"a folder",
        b"right checks, files of garbage",
    ],
)
def test_a_corrupt_or_unreadable_record_costs_a_check_never_a_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walks: list[int], record: bytes
) -> None:
    path = write_tiny_gguf(tmp_path / "long.gguf", vocab=WORDS)
    _seen_later(monkeypatch, 60)
    record_path().parent.mkdir(parents=True)
    if record == b"a folder":
        record_path().mkdir()  # neither read nor replaced: each load checks
        check_model_file(path)
        check_model_file(path)
        assert len(walks) == 2 and record_path().is_dir()
        return
    if record.startswith(b"right checks"):
        files = [{"a": 1}, None, "x", [1, 2], [str(path), "dev"]]
        record = json.dumps({"checks": checks_fingerprint(), "files": files}).encode()
    record_path().write_bytes(record)
    check_model_file(path)
    assert len(walks) == 1 and _recorded(path)  # rewritten whole
    check_model_file(path)
    assert len(walks) == 1


def test_the_cache_folder_is_the_tests_or_follows_the_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    assert cache_dir() == cache
    monkeypatch.delenv("KVSTUDIO_CACHE_DIR")
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(tmp_path / "data"))
    assert cache_dir() == tmp_path / "data" / "cache"


def test_the_engine_trusts_the_record_and_checks_a_changed_file_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real engine: a file recorded as passed is loaded without the checks. It is shown with
    one they refuse but llama.cpp loads (a metadata string 1 byte past the app's 1 MiB cap),
    recorded here with the checks switched off (as the starter's note is trusted with a byte
    flipped, tests/core/test_starter_checked.py): the engine loads it, and refuses it once the
    record is gone. A recorded file rewritten with a repeated token is refused with the very
    sentence the checks give without a record; a corrupt record loads a good file."""
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf")
    long_string = tmp_path / "long-string.gguf"
    long_string.write_bytes(
        set_value(tiny.read_bytes(), "general.description", STRING, "x" * (1024 * 1024 + 1))
    )
    refused_for_its_string = _refusal(long_string)
    assert "1,048,577 bytes" in refused_for_its_string
    long_vocab = write_tiny_gguf(tmp_path / "long.gguf", vocab=WORDS)
    _seen_later(monkeypatch, 60)
    with monkeypatch.context() as checks_off:
        checks_off.setattr(gguf_read, "check_gguf", lambda _path: None)
        checks_off.setattr(gguf_tokenizer, "check_token_list_file", lambda *_args: None)
        check_model_file(long_string)
    check_model_file(long_vocab)  # the real checks: it passes
    assert _recorded(long_string) and _recorded(long_vocab)

    words = [*WORDS]
    words[-1] = words[17]  # shorter: the file's size and modification time change
    write_tiny_gguf(long_vocab, vocab=words)
    refused_for_its_token = _refusal(long_vocab)

    engine = EngineProcess()
    try:
        engine.start()
        assert isinstance(load_answer(engine, long_string), Loaded)  # not checked: recorded

        answer = load_answer(engine, long_vocab)
        assert isinstance(answer, Failed) and answer.message == refused_for_its_token

        record_path().unlink()
        answer = load_answer(engine, long_string)
        assert isinstance(answer, Failed) and answer.message == refused_for_its_string

        record_path().write_bytes(b"\x00 not a record")
        assert isinstance(load_answer(engine, tiny), Loaded)
    finally:
        engine.stop()
