"""Files the header checks once accepted but that make llama.cpp abort or loop: each is refused
in one sentence before llama.cpp sees it, and the engine that was asked to load it stays up.

For the files that abort, llama.cpp itself is shown aborting on them (a bare llama_cpp child,
no app checks, under a memory ceiling), so these refusals are dropped only if llama.cpp stops
aborting. The RWKV tokenizer case grows without bound instead, so it is never handed to
llama.cpp here: its growth was measured once by hand, under an address-space ceiling.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.messages import Failed, Loaded
from app.engine.process import EngineProcess
from app.models.gguf_read import read_gguf_header
from app.platform.errors import InvalidGgufError
from tests.engine_events import load_answer
from tests.gguf_factory import tiny_vocab, write_tiny_gguf
from tests.hostile_gguf import ARRAY, STRING, UINT32, header_layout, set_value

# A bare llama.cpp load under a 3 GiB address-space ceiling: the tiny model needs ~1 GiB of
# address space, and a loop that allocates ends at the ceiling instead of growing the machine.
_BARE_LOAD = """
import os, resource, sys
os.environ["GGML_NO_BACKTRACE"] = "1"
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
import llama_cpp
llama_cpp.Llama(sys.argv[1], n_ctx=256, verbose=False)
"""


def _tiny(folder: Path) -> bytes:
    return write_tiny_gguf(folder / "tiny.gguf").read_bytes()


def _with_alignment(data: bytes, alignment: int) -> bytes:
    """`data` declaring `alignment`, its tensor data moved to the first boundary of it after
    the header (as a writer with that alignment puts it)."""
    start = -(-header_layout(data).header_end // 32) * 32
    header = set_value(data, "general.alignment", UINT32, alignment)
    header = header[: header_layout(header).header_end]
    return header + b"\0" * (-len(header) % alignment) + data[start:]


def _repeated_token(data: bytes) -> bytes:
    tokens = tiny_vocab()[0]
    tokens[-1] = tokens[-2]
    return set_value(data, "tokenizer.ggml.tokens", ARRAY, tokens, STRING)


def _tokenizer(data: bytes, model: str) -> bytes:
    return set_value(data, "tokenizer.ggml.model", STRING, model)


ABORTING = {
    "alignment 1": (lambda d: _with_alignment(d, 1), "off the 32-byte boundary"),
    "bert tokenizer on a llama": (lambda d: _tokenizer(d, "bert"), "BERT (WordPiece) tokenizer"),
    "a repeated token": (_repeated_token, "twice in its vocabulary"),
}
REFUSED = {
    **ABORTING,
    "rwkv tokenizer on a llama": (lambda d: _tokenizer(d, "rwkv"), "RWKV tokenizer"),
    "no vocabulary": (lambda d: _tokenizer(d, "none"), "has no vocabulary"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_header_check_refuses_it_in_one_sentence(case, tmp_path) -> None:
    make, said = REFUSED[case]
    path = tmp_path / "hostile.gguf"
    path.write_bytes(make(_tiny(tmp_path)))
    with pytest.raises(InvalidGgufError) as caught:
        read_gguf_header(path)
    message = str(caught.value)
    assert said in message and message.startswith("The GGUF file") and "\n" not in message
    assert caught.value.kind in ("offset", "tokenizer")


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(ABORTING))
def test_llama_cpp_itself_aborts_on_it(case, tmp_path) -> None:
    path = tmp_path / "hostile.gguf"
    path.write_bytes(ABORTING[case][0](_tiny(tmp_path)))
    bare = subprocess.run(
        [sys.executable, "-c", _BARE_LOAD, str(path)], capture_output=True, timeout=300
    )
    assert bare.returncode == -signal.SIGABRT, bare.stderr[-500:]


def test_larger_alignments_and_real_tokenizers_still_load(tmp_path) -> None:
    data = _tiny(tmp_path)
    for name, variant in (
        ("align64", _with_alignment(data, 64)),
        ("t5", _tokenizer(data, "t5")),
        ("plamo2", _tokenizer(data, "plamo2")),
    ):
        path = tmp_path / f"{name}.gguf"
        path.write_bytes(variant)
        assert read_gguf_header(path).architecture == "llama", name


@pytest.mark.slow
def test_the_engine_refuses_them_and_stays_up(tmp_path) -> None:
    """Through the real engine: each file, the RWKV one too, is refused with the sentence, the
    engine process is the same one afterwards, and a good file then loads in it. A token list
    too long for the header read to keep (5,000 tokens) is checked by the engine's load."""
    data = _tiny(tmp_path)
    words = [f"\u2581w{i}" for i in range(5_000)]
    words[4_999] = words[17]
    long_vocab = write_tiny_gguf(tmp_path / "long.gguf", vocab=words)
    assert read_gguf_header(long_vocab).architecture == "llama"  # the header read accepts it
    files = {"a repeated token among 5,259": (long_vocab, "twice in its vocabulary")}
    for case, (make, said) in REFUSED.items():
        path = tmp_path / f"{case.replace(' ', '-')}.gguf"
        path.write_bytes(make(data))
        files[case] = (path, said)
    engine = EngineProcess()
    try:
        engine.start()
        pid = engine.pid
        for case, (path, said) in files.items():
            answer = load_answer(engine, path)
            assert isinstance(answer, Failed) and said in answer.message, (case, answer)
            assert "\n" not in answer.message and engine.pid == pid, case
        assert isinstance(load_answer(engine, tmp_path / "tiny.gguf"), Loaded)
        assert engine.pid == pid
    finally:
        engine.stop()
