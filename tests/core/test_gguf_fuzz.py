"""Fuzz of the GGUF validator: over 10,000 mutated headers of real GGUFs (the starter model's
and factory files), each read as the app reads a local file. Every one is either accepted (and
then usable by the fit arithmetic) or refused with InvalidGgufError in one line: no other
exception, no hang (a per-case time limit), and memory bounded by the header bytes read: at
most 3x them plus 4 MiB (tests/hostile_fuzz.py says why), checked on every case against the
process's peak resident memory (its high-water mark, reset before each read), and on every
4th case (by number, every outcome class among them) also against tracemalloc's peak.
tracemalloc counts what is allocated even if never touched, but its per-allocation tracing
makes a read 4.4x slower: on every case it was ~45 of the module's ~60 CPU seconds.

Reproducible: each case draws from its own seeded generator (`random.Random("<test>:<n>")`),
so the same cases run on every machine, and a failure names its case (`factory-bytes:1234`):
that string seeds the generator that redraws it alone. Not hypothesis: its machinery cost 6x
the attacks themselves (24 s of a 3,000-case run, 3.3 s of it the reads), and the edge values
come from INTERESTING anyway."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.gguf_factory import write_tiny_gguf, write_vocab_only_gguf
from tests.hostile_fuzz import (
    FLOATS,
    INTERESTING,
    TRACE_EVERY,
    PeakMemory,
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
# Most cases on small real files, a few thousand on the starter model's header with its
# tokenizer cut, 20 on the whole real one (each walks 262,144 tokens).
FACTORY_FIELD_EXAMPLES = 5_500
FACTORY_BYTE_EXAMPLES = 3_000
STARTER_TRIMMED_EXAMPLES = 1_500
STARTER_FULL_EXAMPLES = 20


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
        # The sample traced with tracemalloc holds every kind of case the whole run met.
        assert set(tally.traced) == set(tally.outcomes), (tally.traced, tally.outcomes)
        bad = {k: v for k, v in tally.outcomes.items() if k != "accepted"}
        reliability.record(
            AREA,
            "fuzz: mutated headers tried (seeded, the same cases every run)",
            f"{tally.tried:,}",
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
        high_water = (
            "its high-water mark reset before each read"
            if tally.resets
            else "over the highest mark before each read (the kernel did not let it be reset)"
        )
        reliability.record(
            AREA,
            "fuzz: memory per case",
            "at most 3x the header bytes read (the read and its copies) + 4 MiB: on every case "
            f"the peak resident memory (getrusage ru_maxrss, {high_water}), at most "
            f"{tally.worst_resident:.0%} of that bound; on every {TRACE_EVERY}th case "
            f"({sum(tally.traced.values()):,}, every outcome class among them) also the "
            f"tracemalloc peak, at most {tally.worst_traced:.0%} of it",
        )
        reliability.record(AREA, "fuzz: slowest case (s)", f"{tally.slowest_s:.2f}")


Mutation = Callable[[random.Random, Seed], tuple[bytes, int]]


def _run(name: str, seeds: list[Seed], tally: Tally, examples: int, mutate: Mutation) -> None:
    local = Tally()
    memory = PeakMemory()
    try:
        for n in range(examples):
            case = f"{name}:{n}"
            rng = random.Random(case)  # its own seed: a failing case reruns alone
            seed = seeds[rng.randrange(len(seeds))]
            mutated, total = mutate(rng, seed)
            try:
                attack(mutated, total, local, memory, traced=n % TRACE_EVERY == 0)
            except BaseException as error:
                raise AssertionError(f"case {case!r} on {seed.name} failed: {error!r}") from error
    finally:
        memory.close()
    assert local.tried == examples  # every case ran to an outcome
    tally.merge(local)


def _edge_value(rng: random.Random, current: int, size: int) -> int:
    """An edge value, the field's value one off or doubled/halved, or any value of its width."""
    pick = rng.randrange(3)
    if pick == 0:
        return rng.choice(INTERESTING)
    if pick == 1:
        return rng.choice((current + 1, current - 1, current * 2, current // 2))
    return rng.getrandbits(8 * size)


def field_edits(rng: random.Random, seed: Seed) -> tuple[bytes, int]:
    """1-3 fields (counts, lengths, types, values, dimensions, offsets) set to edge values."""
    out = seed.data
    for _ in range(rng.randint(1, 3)):
        f = rng.choice(seed.fields)
        value: int | float
        if f.kind == "float" and rng.random() < 0.5:
            value = rng.choice(FLOATS)
        else:
            current = int.from_bytes(out[f.offset : f.offset + f.size], "little")
            value = _edge_value(rng, current, f.size)
        out = overwrite(out, f, value)
    return out, seed.total - len(seed.data) + len(out)


def byte_edits(rng: random.Random, seed: Seed) -> tuple[bytes, int]:
    """1-4 raw edits inside the header: bytes set, inserted or deleted, or the file cut."""
    out, total = seed.data, seed.total
    for _ in range(rng.randint(1, 4)):
        op = rng.choice(("set", "set", "insert", "delete", "cut"))
        pos = rng.randint(0, seed.header_end + 16)
        blob = rng.randbytes(rng.randint(1, 9))
        before = len(out)
        out, cut = byte_edit(out, op, pos, blob)
        total = cut if cut is not None else total + len(out) - before
    return out, total


def test_fuzz_factory_files_field_edits(factory_seeds, fuzz_tally) -> None:
    _run("factory-fields", factory_seeds, fuzz_tally, FACTORY_FIELD_EXAMPLES, field_edits)


def test_fuzz_factory_files_byte_edits(factory_seeds, fuzz_tally) -> None:
    _run("factory-bytes", factory_seeds, fuzz_tally, FACTORY_BYTE_EXAMPLES, byte_edits)


def test_fuzz_starter_header_tokenizer_cut(starter_seeds, fuzz_tally) -> None:
    seed = starter_seeds["trimmed"]
    half = STARTER_TRIMMED_EXAMPLES // 2
    _run("starter-64-fields", [seed], fuzz_tally, half, field_edits)
    _run("starter-64-bytes", [seed], fuzz_tally, STARTER_TRIMMED_EXAMPLES - half, byte_edits)


def test_fuzz_starter_header_whole(starter_seeds, fuzz_tally) -> None:
    # The real 6.5 MB header: each case walks its 262,144 tokens (~0.05 s, ~0.5 s traced).
    _run("starter-fields", [starter_seeds["full"]], fuzz_tally, STARTER_FULL_EXAMPLES, field_edits)
