"""GGUF header reading: the real starter model, factory-written files, prefixes, broken files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from app.models.gguf_header import ArraySummary
from app.models.gguf_read import GgufHeaderIncompleteError, parse_gguf_header, read_gguf_header
from app.platform.errors import (
    BadInputError,
    ModelFileMissingError,
    NotAGgufError,
    TruncatedGgufError,
)
from tests.gguf_factory import write_tiny_gguf, write_vocab_only_gguf


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory) -> Path:
    return write_tiny_gguf(
        tmp_path_factory.mktemp("hdr") / "tiny.gguf",
        arch="llama",
        n_layer=3,
        n_head=8,
        n_head_kv=2,
        head_dim=64,
        n_ctx_train=2048,
        chat_template="{{ messages }}",
        name="Tiny Llama",
    )


def test_starter_model_header(starter_model_path):
    header = read_gguf_header(starter_model_path)
    assert header.architecture == "gemma3"
    assert header.name == "Gemma 3 270m"
    assert header.quantization == "Q4_K_M"
    assert header.block_count == 18
    assert header.context_length == 32768
    assert header.embedding_length == 640
    assert header.head_count == 4 and header.head_count_kv == 1
    assert header.key_length == header.value_length == 256
    assert header.sliding_window == 512
    assert header.vocab_size == 262_144
    assert not header.has_chat_template
    # 268M parameters: "270M" as the model is sold.
    assert 260e6 < header.parameter_count < 275e6
    # The big tokenizer arrays are summarised, not kept.
    assert header.metadata["tokenizer.ggml.tokens"] == ArraySummary("string", 262_144)
    # The tensor table ends exactly where the file does.
    assert header.data_end == os.path.getsize(starter_model_path) == header.file_size
    assert header.data_offset % header.alignment == 0


def test_factory_file_header(tiny_llama):
    header = read_gguf_header(tiny_llama)
    assert header.architecture == "llama" and header.name == "Tiny Llama"
    assert (header.block_count, header.head_count, header.head_count_kv) == (3, 8, 2)
    assert header.key_length == 64 and header.context_length == 2048
    assert header.quantization == "F16"
    assert header.has_chat_template and header.chat_template == "{{ messages }}"
    assert header.sliding_window is None
    names = {t.name for t in header.tensors}
    assert {"token_embd.weight", "blk.2.attn_k.weight"} <= names
    k = next(t for t in header.tensors if t.name == "blk.0.attn_k.weight")
    assert k.shape == (header.embedding_length, 2 * 64) and k.type_name == "F16"
    assert header.data_end == os.path.getsize(tiny_llama)


def test_per_layer_kv_heads_and_swa_pattern(tmp_path):
    path = write_tiny_gguf(
        tmp_path / "g.gguf",
        arch="gemma3",
        n_layer=3,
        n_head=4,
        n_head_kv=[2, 1, 2],
        head_dim=64,
        sliding_window=256,
        sliding_window_pattern=[True, True, False],
    )
    header = read_gguf_header(path)
    assert header.head_count_kv == [2, 1, 2]
    assert header.head_count_kv_at(1) == 1
    assert header.sliding_window == 256
    assert header.sliding_window_pattern == [True, True, False]


def test_prefix_too_short_says_how_many_bytes_it_needs(starter_model_path):
    size = os.path.getsize(starter_model_path)
    with open(starter_model_path, "rb") as f:
        data = f.read(4096)
        with pytest.raises(GgufHeaderIncompleteError) as caught:
            parse_gguf_header(data, size)
        # Fetch more the way the Hub client does (doubling), never the whole file.
        while True:
            try:
                header = parse_gguf_header(data, size)
                break
            except GgufHeaderIncompleteError as error:
                assert error.bytes_needed > len(data)
                data += f.read(max(error.bytes_needed, 2 * len(data)) - len(data))
    assert caught.value.bytes_needed > 4096
    assert len(data) < 16 * 1024 * 1024 < size
    assert header == read_gguf_header(starter_model_path)


def test_prefix_without_total_size_is_not_checked_for_truncation(tiny_llama):
    data = tiny_llama.read_bytes()
    header = parse_gguf_header(data[: read_gguf_header(tiny_llama).data_offset])
    assert header.file_size is None and header.block_count == 3


def test_file_cut_inside_tensor_data_is_truncated(tiny_llama, tmp_path):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_llama.read_bytes()[:-100])
    with pytest.raises(TruncatedGgufError, match="truncated"):
        read_gguf_header(cut)


def test_file_cut_inside_header_is_truncated(tiny_llama, tmp_path):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_llama.read_bytes()[:300])
    with pytest.raises(TruncatedGgufError, match="inside its header"):
        read_gguf_header(cut)
    assert not isinstance(_error(lambda: read_gguf_header(cut)), GgufHeaderIncompleteError)


def _error(call):
    try:
        call()
    except Exception as error:  # noqa: BLE001
        return error
    return None


@pytest.mark.parametrize(
    "content",
    [b"not a model at all, just text\n" * 10, b"\x00" * 64, b"PK\x03\x04zipfile", b"GG"],
    ids=["text", "zeros", "zip", "two-bytes"],
)
def test_garbage_is_not_a_gguf(tmp_path, content):
    path = tmp_path / "x.gguf"
    path.write_bytes(content)
    with pytest.raises(NotAGgufError, match="not a GGUF"):
        read_gguf_header(path)


def test_unsupported_version(tiny_llama, tmp_path):
    data = bytearray(tiny_llama.read_bytes())
    data[4:8] = (99).to_bytes(4, "little")
    path = tmp_path / "v99.gguf"
    path.write_bytes(bytes(data))
    with pytest.raises(NotAGgufError, match="version 99"):
        read_gguf_header(path)


def test_missing_file(tmp_path):
    with pytest.raises(ModelFileMissingError, match="does not exist"):
        read_gguf_header(tmp_path / "nope.gguf")


def test_errors_are_bad_input(tmp_path, tiny_llama):
    # The CLI turns these into one line and exit code 2.
    shutil.copy(tiny_llama, tmp_path / "ok.gguf")
    for cls in (
        ModelFileMissingError,
        NotAGgufError,
        TruncatedGgufError,
        GgufHeaderIncompleteError,
    ):
        assert issubclass(cls, BadInputError)


@pytest.fixture(scope="module")
def vocab_only_files(tmp_path_factory) -> list[Path]:
    """Vocab-only GGUFs as llama.cpp's converter writes them (its `models/ggml-vocab-*.gguf`),
    one per tokenizer family."""
    folder = tmp_path_factory.mktemp("vocab")
    return [
        write_vocab_only_gguf(folder / f"ggml-vocab-{name}.gguf", tokenizer=name, n_vocab=n_vocab)
        for name, n_vocab in (("llama", 32_000), ("gpt2", 50_257), ("bert", 30_522))
    ]


@pytest.mark.slow
def test_llama_cpp_vocab_only_files(vocab_only_files):
    # A whole tokenizer and no tensors, so no padding at the end: the data ends with the header.
    for path in vocab_only_files:
        header = read_gguf_header(path)
        assert header.tensors == () and header.vocab_size and header.vocab_size > 30_000, path
        assert header.data_end == header.header_bytes == path.stat().st_size, path
        assert (
            header.data_offset > header.header_bytes
        )  # padding would start here, if data followed
        assert header.parameter_count == 0


def test_vocab_only_files_are_ones_llama_cpp_loads(vocab_only_files):
    """The fixture is a real vocab-only model, not just bytes our reader accepts."""
    import llama_cpp

    for path in vocab_only_files:
        llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
        try:
            assert llm.n_vocab() == read_gguf_header(path).vocab_size
            assert llm.tokenize(b"Hello world", add_bos=False), path
        finally:
            llm.close()
