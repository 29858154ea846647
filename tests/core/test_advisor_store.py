"""The KV advisor's store and rule without an engine: measurements kept per model file by its
sha256 (a changed file is hashed again, a damaged database set aside), quality lent by the
nearest measured model of the same family as an estimate, and the rule's tie-break.
Measured runs on the real engine are in tests/ui/test_kv_advisor.py."""

from __future__ import annotations

import math
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from app.kv.advisor import (
    ESTIMATE,
    MEASURED,
    SAME_SIZE_FACTOR,
    UNKNOWN,
    ModeMeasurement,
    advise,
    quality_of,
    speed_at,
)
from app.kv.advisor_store import FILE_NAME, MeasurementStore, sha256_of_file
from app.kv.fit import MARGIN, fit_estimate, memory_need
from app.kv.kv_types import FP16_KV_MODE, KV_MODES, KvMode
from app.models.gguf_read import read_gguf_header
from app.platform.errors import BadInputError
from tests.gguf_factory import write_tiny_gguf

Q8 = KvMode.parse("q8_0/q8_0")


def tiny(folder: Path, name: str, n_layer: int = 2) -> Path:
    return write_tiny_gguf(folder / name, n_layer=n_layer, head_dim=64, n_ctx_train=8192)


def measured(mode: str, kl: float | None, tps: float | None = None, depth: int = 0):
    return ModeMeasurement(mode, kl, None if kl is None else 1 - kl, 255, tps, depth, time.time())


def test_measurements_are_kept_per_file_and_read_back(tmp_path: Path) -> None:
    model = tiny(tmp_path, "a.gguf")
    store = MeasurementStore(tmp_path / "data")
    identity = store.identity(model, read_gguf_header(model))
    assert identity.sha256 == sha256_of_file(model)
    store.add(identity, [measured("q8_0/f16", 0.004, 20.0)])
    again = MeasurementStore(tmp_path / "data").for_model(identity.sha256)  # a new process
    assert again is not None and again.model == identity
    assert [(m.mode, m.mean_kl_divergence) for m in again.modes] == [("q8_0/f16", 0.004)]


def test_a_file_changed_in_place_is_hashed_again(tmp_path: Path) -> None:
    model = tiny(tmp_path, "a.gguf")
    store = MeasurementStore(tmp_path)
    first = store.sha256(model)
    with model.open("ab") as f:
        f.write(b"\0" * 32)  # new bytes, and a new size
    os.utime(model, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert store.sha256(model) == sha256_of_file(model) != first


def test_a_damaged_database_is_set_aside_and_measuring_goes_on(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_bytes(b"this is not SQLite" * 100)
    model = tiny(tmp_path, "a.gguf")
    store = MeasurementStore(tmp_path)
    store.add(store.identity(model, read_gguf_header(model)), [measured("q8_0/f16", 0.01)])
    assert len(store.measurements()) == 1
    kept = list(tmp_path.glob(f"{FILE_NAME}.bak-*"))
    assert len(kept) == 1 and kept[0].read_bytes().startswith(b"this is not SQLite")


def test_a_sibling_lends_its_quality_as_an_estimate_and_a_stranger_does_not(
    tmp_path: Path,
) -> None:
    store = MeasurementStore(tmp_path)
    sibling = tiny(tmp_path, "sibling.gguf")
    other_size = tiny(tmp_path, "bigger.gguf", n_layer=8)  # four times the blocks
    mine = write_tiny_gguf(tmp_path / "mine.gguf", n_layer=2, head_dim=64, n_ctx_train=4096)
    for path, kl in ((sibling, 0.003), (other_size, 0.001)):
        store.add(store.identity(path, read_gguf_header(path)), [measured("q8_0/f16", kl)])
    me = store.identity(mine, read_gguf_header(mine))
    quality = quality_of(KvMode.parse("q8_0/f16"), me, store.measurements())
    assert (quality.source, quality.kl, quality.from_model) == (ESTIMATE, 0.003, "sibling.gguf")
    assert quality_of(Q8, me, store.measurements()).source == UNKNOWN  # nobody measured it
    # Once this file is measured, its own figure wins over the sibling's.
    store.add(me, [measured("q8_0/f16", 0.02)])
    own = quality_of(KvMode.parse("q8_0/f16"), me, store.measurements())
    assert (own.source, own.kl) == (MEASURED, 0.02)
    # A newer measurement of the file replaces the older one in the advice.
    newer = replace(measured("q8_0/f16", 0.005), measured_at=time.time() + 60)
    store.add(me, [newer])
    assert quality_of(KvMode.parse("q8_0/f16"), me, store.measurements()).kl == 0.005


def test_decode_speed_is_fitted_along_the_depth(tmp_path: Path) -> None:
    store = MeasurementStore(tmp_path)
    model = tiny(tmp_path, "a.gguf")
    me = store.identity(model, read_gguf_header(model))
    assert speed_at(Q8, me, store.measurements(), 4096).source == UNKNOWN
    # 10 ms per token at depth 0, 20 ms at 1,024: 50 ms at 4,096, a straight line.
    store.add(me, [measured("q8_0/q8_0", 0.01, 100.0, 0), measured("q8_0/q8_0", 0.01, 50.0, 1024)])
    speed = speed_at(Q8, me, store.measurements(), 4096)
    assert speed.decode_tokens_per_second == pytest.approx(20.0)
    assert speed.depths == (0, 1024) and "from depths 0, 1,024" in speed.words


def test_with_room_for_everything_the_tie_goes_to_f16(tmp_path: Path) -> None:
    model = tiny(tmp_path, "a.gguf")
    header = read_gguf_header(model)
    store = MeasurementStore(tmp_path)
    me = store.identity(model, header)
    store.add(me, [measured(m.label, 0.001) for m in KV_MODES[1:]])
    fits = fit_estimate(header, model.stat().st_size, 8192, 64 * 2**30, KV_MODES)
    advice = advise(me, fits, store.measurements(), budget_words="64 GiB")
    assert advice.choice is not None and advice.choice.mode == FP16_KV_MODE
    assert advice.n_ctx == 8192 and "f16" in advice.sentence
    with pytest.raises(BadInputError, match="KL divergence of 0 or more"):
        advise(me, fits, store.measurements(), budget_words="", max_kl=-0.5)


def test_another_family_or_size_lends_nothing(tmp_path: Path) -> None:
    store = MeasurementStore(tmp_path)
    other_family = write_tiny_gguf(tmp_path / "gemma.gguf", arch="gemma3", head_dim=64)
    four_times = tiny(tmp_path, "bigger.gguf", n_layer=8)  # outside SAME_SIZE_FACTOR
    for path in (other_family, four_times):
        store.add(store.identity(path, read_gguf_header(path)), [measured("q8_0/f16", 0.002)])
    mine = tiny(tmp_path, "mine.gguf")
    me = store.identity(mine, read_gguf_header(mine))
    gemma = store.identity(other_family, read_gguf_header(other_family))
    assert gemma.architecture != me.architecture  # of a size to lend, but another family
    assert abs(math.log(gemma.parameters / me.parameters)) <= math.log(SAME_SIZE_FACTOR)
    assert quality_of(KvMode.parse("q8_0/f16"), me, store.measurements()).source == UNKNOWN


def test_a_context_no_mode_reaches_gets_the_largest_within_budget_and_a_note(
    tmp_path: Path,
) -> None:
    model = tiny(tmp_path, "a.gguf")
    header = read_gguf_header(model)
    store = MeasurementStore(tmp_path)
    me = store.identity(model, header)
    store.add(me, [measured(m.label, 0.001) for m in KV_MODES[1:]])
    need = memory_need(header, 2048, FP16_KV_MODE, file_size=model.stat().st_size)
    budget = int(need.total_bytes / (1 - MARGIN)) + 1  # f16/f16 fits about 2,048 tokens
    fits = fit_estimate(header, model.stat().st_size, 8192, budget, KV_MODES)
    advice = advise(me, fits, store.measurements(), budget_words="a little", context=8192)
    largest = max(row.largest_n_ctx for row in advice.rows)
    assert advice.choice is not None and advice.n_ctx == largest < 8192
    assert "No mode within the quality budget fits 8,192 tokens here." in advice.notes
