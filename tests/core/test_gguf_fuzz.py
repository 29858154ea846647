"""Property-based fuzz of the GGUF validator: over 10,000 mutated headers of real GGUFs (the
starter model's and factory files), each read as the app reads a local file. Every one is
either accepted (and then usable by the fit arithmetic) or refused with InvalidGgufError in
one line: no other exception, no hang (a per-case time limit), memory bounded by the header
bytes read plus a few MiB (tracemalloc). Reproducible: hypothesis runs derandomized."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gguf_factory import write_tiny_gguf, write_vocab_only_gguf
from tests.hostile_fuzz import (
    FLOATS,
    INTERESTING,
    Seed,
    Tally,
    attack,
    byte_edit,
    make_seed,
    overwrite,
)
from tests.hostile_gguf import header_bytes, trimmed_vocab

# Over a second per test on 2 cores: in the full suite, not the fast tier (docs/testing.md).
pytestmark = pytest.mark.slow

AREA = "Hostile GGUF files"
# The fuzz's share of ~40 s on a busy 2-core machine: most cases on small real files, a few
# thousand on the starter model's header with its tokenizer cut, 20 on the whole real one.
FACTORY_FIELD_EXAMPLES = 5_500
FACTORY_BYTE_EXAMPLES = 3_000
STARTER_TRIMMED_EXAMPLES = 1_500
STARTER_FULL_EXAMPLES = 20


def _settings(n: int) -> settings:
    return settings(
        max_examples=n,
        derandomize=True,  # the same cases on every run and in CI
        deadline=timedelta(seconds=5),
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def _padded(header: bytes) -> int:
    """Where the data section starts after `header` (the default 32-byte alignment)."""
    return -(-len(header) // 32) * 32


@pytest.fixture(scope="module")
def factory_seeds(tmp_path_factory) -> list[Seed]:
    folder = tmp_path_factory.mktemp("fuzz-seeds")
    files = [
        write_tiny_gguf(folder / "llama.gguf", n_layer=2, n_head=4, n_head_kv=2),
        write_tiny_gguf(
            folder / "gemma3.gguf",
            arch="gemma3",
            n_layer=3,
            n_head=4,
            n_head_kv=[2, 1, 2],
            sliding_window=256,
            sliding_window_pattern=[True, True, False],
            chat_template="{{ messages }}",
        ),
        write_vocab_only_gguf(folder / "vocab-gpt2.gguf", tokenizer="gpt2", n_vocab=600),
    ]
    # Their headers only, past which the virtual file is zeros as for the starter, with the
    # tokenizer cut to 32 entries: a parse costs a fraction of a millisecond, so the fuzz
    # spends its time on the fields, not on re-reading the same 283 tokens.
    seeds = []
    for path in files:
        data, total = header_bytes(path)
        cut = trimmed_vocab(data, 32)
        seeds.append(make_seed(path.name, cut, _padded(cut) + total - len(data)))
    return seeds


@pytest.fixture(scope="module")
def starter_seeds(starter_model_path) -> dict[str, Seed]:
    """The starter model's real header (its first 6.5 MB, not its weights) and the same
    header with its tokenizer cut to 64 entries."""
    data, total = header_bytes(Path(starter_model_path))
    cut = trimmed_vocab(data, 64)
    weights = total - len(data)
    return {
        "full": make_seed("starter", data, total),
        "trimmed": make_seed("starter-64", cut, _padded(cut) + weights),
    }


@pytest.fixture(scope="module")
def fuzz_tally(reliability) -> Iterator[Tally]:
    """The module's attacks added up, recorded once every fuzz test of the module passed."""
    tally = Tally()
    yield tally
    if tally.tried >= 10_000:
        bad = {k: v for k, v in tally.outcomes.items() if k != "accepted"}
        reliability.record(
            AREA, "fuzz: mutated headers tried (hypothesis, derandomized)", f"{tally.tried:,}"
        )
        reliability.record(
            AREA,
            "fuzz: accepted (and then used by the fit arithmetic)",
            f"{tally.outcomes['accepted']:,}",
        )
        reliability.record(
            AREA,
            "fuzz: refused, by class",
            ", ".join(f"{k} {v:,}" for k, v in sorted(bad.items(), key=lambda kv: -kv[1])),
        )
        reliability.record(
            AREA,
            "fuzz: what was mutated",
            f"the starter model's real header {STARTER_FULL_EXAMPLES}, with its tokenizer cut to "
            f"64 entries {STARTER_TRIMMED_EXAMPLES:,}; factory llama, gemma3 and vocab-only "
            f"headers {FACTORY_FIELD_EXAMPLES + FACTORY_BYTE_EXAMPLES:,} (fields set to edge "
            "values; bytes set, inserted, deleted, cut)",
        )
        reliability.record(AREA, "fuzz: crashes / hangs / uncaught exceptions", "0 / 0 / 0")
        reliability.record(
            AREA,
            "fuzz: memory per case (tracemalloc peak)",
            "at most 3x the header bytes read (the read and its copies) + 4 MiB, every case",
        )
        reliability.record(AREA, "fuzz: slowest case (s)", f"{tally.slowest_s:.2f}")


def _run(
    seeds: list[Seed],
    tally: Tally,
    examples: int,
    mutate: Callable[[st.DataObject, Seed], tuple[bytes, int, int]],
) -> None:
    local = Tally()

    @_settings(examples)
    @given(st.data())
    def case(data: st.DataObject) -> None:
        seed = seeds[data.draw(st.integers(0, len(seeds) - 1), label="seed")]
        mutated, total, score = mutate(data, seed)
        attack(mutated, total, local)

    case()
    assert local.tried >= examples  # every example ran to an outcome
    tally.merge(local)


def field_edits(data: st.DataObject, seed: Seed) -> tuple[bytes, int, int]:
    """1-3 fields (counts, lengths, types, values, dimensions, offsets) set to edge values."""
    out, score = seed.data, 0
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        f = seed.fields[data.draw(st.integers(0, len(seed.fields) - 1), label="field")]
        if f.kind == "float" and data.draw(st.booleans()):
            value: int | float = data.draw(st.sampled_from(FLOATS))
        else:
            current = int.from_bytes(out[f.offset : f.offset + f.size], "little")
            value = data.draw(
                st.sampled_from(INTERESTING)
                | st.sampled_from((current + 1, current - 1, current * 2, current // 2))
                | st.integers(0, 2 ** (8 * f.size) - 1),
                label="value",
            )
            score = max(score, int(value) if f.kind in ("count", "length", "dims") else 0)
        out = overwrite(out, f, value)
    return out, seed.total - len(seed.data) + len(out), score


def byte_edits(data: st.DataObject, seed: Seed) -> tuple[bytes, int, int]:
    """1-4 raw edits inside the header: bytes set, inserted or deleted, or the file cut."""
    out, total = seed.data, seed.total
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        op = data.draw(st.sampled_from(("set", "set", "insert", "delete", "cut")), label="op")
        pos = data.draw(st.integers(0, seed.header_end + 16), label="at")
        blob = data.draw(st.binary(min_size=1, max_size=9), label="bytes")
        before = len(out)
        out, cut = byte_edit(out, op, pos, blob)
        total = cut if cut is not None else total + len(out) - before
    return out, total, 0


def test_fuzz_factory_files_field_edits(factory_seeds, fuzz_tally) -> None:
    _run(factory_seeds, fuzz_tally, FACTORY_FIELD_EXAMPLES, field_edits)


def test_fuzz_factory_files_byte_edits(factory_seeds, fuzz_tally) -> None:
    _run(factory_seeds, fuzz_tally, FACTORY_BYTE_EXAMPLES, byte_edits)


def test_fuzz_starter_header_tokenizer_cut(starter_seeds, fuzz_tally) -> None:
    seed = starter_seeds["trimmed"]
    half = STARTER_TRIMMED_EXAMPLES // 2
    _run([seed], fuzz_tally, half, field_edits)
    _run([seed], fuzz_tally, STARTER_TRIMMED_EXAMPLES - half, byte_edits)


def test_fuzz_starter_header_whole(starter_seeds, fuzz_tally) -> None:
    # The real 6.5 MB header: each case walks its 262,144 tokens (~0.5 s traced), so a few.
    _run([starter_seeds["full"]], fuzz_tally, STARTER_FULL_EXAMPLES, field_edits)
