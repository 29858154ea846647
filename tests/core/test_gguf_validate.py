"""The GGUF validator against the hand-made corpus (tests/hostile_gguf.py): every hostile file
is refused in one line for the class of check it was made for, every real file is accepted,
and a bad file in a folder leaves the good ones listed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from app.models.gguf_read import parse_gguf_header, read_gguf_header
from app.models.gguf_validate import LLAMA_MAX_LAYERS
from app.platform.errors import InvalidGgufError
from tests.gguf_factory import write_tiny_gguf, write_vocab_only_gguf
from tests.hostile_gguf import UINT32, Case, corpus, header_bytes, set_value

AREA = "Hostile GGUF files"


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> list[Case]:
    return corpus(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def written(cases, tmp_path_factory) -> list[tuple[Case, Path]]:
    folder = tmp_path_factory.mktemp("hostile-files")
    out = []
    for i, case in enumerate(cases):
        path = folder / f"case-{i:03d}.gguf"
        path.write_bytes(case.data)
        out.append((case, path))
    return out


def test_every_hostile_file_is_refused_in_one_line_for_its_reason(written, reliability) -> None:
    refused: Counter[str] = Counter()
    for case, path in written:
        with pytest.raises(InvalidGgufError) as caught:
            read_gguf_header(path)
        message = str(caught.value)
        assert caught.value.kind == case.kind, (case.name, message)
        assert message and "\n" not in message and len(message) < 300, (case.name, message)
        assert message.startswith(("The GGUF file", "The file is not a GGUF")), message
        refused[caught.value.kind] += 1
    before = Counter(case.used_to.split(" ")[0] for case, _ in written)
    reliability.record(AREA, "corpus: hand-made hostile files", len(written))
    reliability.record(
        AREA,
        "corpus: refused, by class",
        ", ".join(f"{kind} {n}" for kind, n in sorted(refused.items(), key=lambda kv: -kv[1])),
    )
    reliability.record(
        AREA,
        "corpus: what the reader before the validator did with them",
        f"{before['hang']} hung, {before['crash']} crashed, {before['abort']} reached "
        f"llama.cpp and aborted it (GGML_ASSERT), {before['accepted']} accepted as a model, "
        f"{before['refused']} refused",
    )


def test_truncation_is_caught_at_every_offset_of_a_real_header(starter_model_path) -> None:
    data, total = header_bytes(Path(starter_model_path))
    # Every 1/64 of the header, and the last bytes: never a crash, always 'truncated'.
    for cut in sorted({*range(24, len(data), len(data) // 64), len(data) - 1}):
        with pytest.raises(InvalidGgufError) as caught:
            parse_gguf_header(data[:cut], cut)
        assert caught.value.kind == "truncated", cut


def test_real_files_are_accepted(starter_model_path, tmp_path) -> None:
    files = [
        Path(starter_model_path),
        write_tiny_gguf(tmp_path / "llama.gguf", n_layer=3, n_head=8, n_head_kv=2),
        write_tiny_gguf(
            tmp_path / "gemma3.gguf",
            arch="gemma3",
            n_layer=4,
            n_head_kv=[2, 1, 2, 1],
            sliding_window=128,
            sliding_window_pattern=[True, True, True, False],
        ),
        write_vocab_only_gguf(tmp_path / "vocab.gguf", tokenizer="bert", n_vocab=2000),
    ]
    for path in files:
        assert read_gguf_header(path).architecture in ("gemma3", "llama"), path


def test_block_count_limits_are_llama_cpps(tmp_path) -> None:
    base = write_tiny_gguf(tmp_path / "t.gguf", n_layer=2).read_bytes()
    for count, reason in ((0, "outside 1 to 512"), (LLAMA_MAX_LAYERS + 1, "outside 1 to 512")):
        path = tmp_path / f"b{count}.gguf"
        path.write_bytes(set_value(base, "llama.block_count", UINT32, count))
        with pytest.raises(InvalidGgufError, match=reason):
            read_gguf_header(path)


def test_a_bad_file_in_a_folder_leaves_the_good_ones_listed(written, tmp_path) -> None:
    from app.models.library import list_models
    from app.models.model_folders import ModelFolders

    folder = tmp_path / "models"
    folder.mkdir()
    good = write_tiny_gguf(folder / "good-model.gguf", n_layer=2)
    for case, path in written[::8]:
        (folder / path.name).write_bytes(case.data)
    models = list_models(
        [folder],
        folders=ModelFolders(tmp_path / "data"),
        cache_dir=tmp_path / "hf",
        include_starter=False,
    )
    by_path = {m.path: m for m in models}
    assert by_path[good].error is None and by_path[good].architecture == "llama"
    bad = [m for m in models if m.path != good]
    assert len(bad) == len(written[::8])
    assert all(m.error and "\n" not in m.error for m in bad)


def test_the_models_page_remote_header_check_refuses_them_too(hub_env, cases) -> None:
    from app.models.hub import clear_header_cache, fetch_remote_header

    picked = [c for c in cases if c.used_to.startswith(("hang", "crash", "abort"))]
    hub_env.add_repo(
        "acme/hostile-GGUF", {f"h{i:02d}-Q8_0.gguf": c.data for i, c in enumerate(picked)}
    )
    clear_header_cache()
    for i, case in enumerate(picked):
        with pytest.raises(InvalidGgufError) as caught:
            fetch_remote_header("acme/hostile-GGUF", f"h{i:02d}-Q8_0.gguf")
        assert caught.value.kind == case.kind and "\n" not in str(caught.value), case.name
