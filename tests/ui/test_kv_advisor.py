"""The KV advisor on the real starter model, with KVSTUDIO_FREE_MEMORY capped so f16/f16 fits
only a few thousand tokens: before any measurement it keeps f16 (the quantized modes'
quality is unknown); after one real short measurement (`kvstudio advise --measure`, every mode
in a fresh engine) the next advice reads it from the store and picks a quantized mode within the
quality budget, at a context that then loads in the real engine;
a strict budget keeps f16; `kvstudio advise --json` keeps its documented schema and the load
dialog's Auto gives the same choice."""

from __future__ import annotations

import json
import re
import subprocess
import types
import typing
from pathlib import Path

import pytest

from app.commands.advise import AdviceReport
from app.engine.advisor_measure import ShortMeasurement, measure_for_advice, measurement_steps
from app.kv.advisor_store import MeasurementStore
from app.kv.fit import MARGIN, memory_need
from app.kv.kv_cache import kv_cache_bytes
from app.kv.kv_types import FP16_KV_MODE, KV_MODES, KV_TYPES
from app.load.load_check import gpu_build
from app.models.gguf_read import read_gguf_header
from app.models.random_model import write_model
from app.platform.probes import FREE_MEMORY_ENV
from app.state.settings import Settings
from tests.cli_runner import assert_bad_input, kvstudio
from tests.engine_threads import ENGINE_THREADS
from tests.waits import HANG_GUARD_MS

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
F16_FITS = 4096  # f16/f16 fits about this many tokens in the capped memory
# The quickest measurement that still scores every mode: one chunk of 128 tokens (63 scored).
QUICK = ShortMeasurement(n_ctx=256, chunk_tokens=128, quality_chunks=1, n_prompt=32, n_gen=8)


@pytest.fixture(scope="module")
def env(tmp_path_factory, starter_model_path) -> dict[str, str]:
    """A data folder for this module and free memory capped so that f16/f16 fits about
    F16_FITS tokens with the fit's margin (the starter's weights and buffers come first)."""
    header = read_gguf_header(starter_model_path)
    need = memory_need(
        header, F16_FITS, "f16/f16", file_size=starter_model_path.stat().st_size, on_gpu=False
    )
    cap = int(need.total_bytes / (1 - MARGIN)) + 1
    assert not gpu_build(), "the cap is worked out for system RAM"
    return {"KVSTUDIO_DATA_DIR": str(tmp_path_factory.mktemp("advisor")), FREE_MEMORY_ENV: str(cap)}


def advise_json(env: dict[str, str], *args: str) -> dict:
    result = kvstudio("advise", "starter", "--json", *args, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def before(env) -> dict:
    return advise_json(env)


@pytest.fixture(scope="module")
def measure_run(env, before) -> subprocess.CompletedProcess[str]:
    """`kvstudio advise starter --measure --json` at its smallest useful size (one chunk of
    128 tokens): every mode measured for real in a fresh engine, kept in the module's store."""
    args = ("--measure", "--chunks", "1", "--chunk-tokens", "128", "--json")
    return kvstudio("advise", "starter", *args, env=env, timeout=600)


@pytest.fixture(scope="module")
def measured(measure_run) -> dict[str, float]:
    """The quantized modes' KL divergence, as the measuring run measured it."""
    assert measure_run.returncode == 0, measure_run.stderr
    rows = json.loads(measure_run.stdout)["modes"]
    return {r["kv"]: r["mean_kl_divergence"] for r in rows if r["quality_source"] == "measured"}


def loose_budget(measured: dict[str, float]) -> str:
    """A quality budget the 8-bit modes' measured KL divergence is within."""
    return f"{max(measured['q8_0/f16'], measured['q8_0/q8_0']):.6f}"


def test_without_measurements_it_keeps_f16_and_says_why(before) -> None:
    assert before["choice"]["kv"] == "f16/f16"
    assert F16_FITS - 512 <= before["choice"]["n_ctx"] <= F16_FITS
    rows = {row["kv"]: row for row in before["modes"]}
    assert rows["q8_0/q8_0"]["quality_source"] == "unknown"
    assert rows["q8_0/q8_0"]["largest_n_ctx"] > before["choice"]["n_ctx"]
    assert any("not measured" in note for note in before["notes"])


def test_measure_says_its_time_first_and_the_next_advice_reads_the_store(
    env, before, measure_run, measured
) -> None:
    said = measure_run.stderr.splitlines()
    assert re.fullmatch(r"Measuring 4 K/V modes on .+\.gguf: about \d+ s \(.+\)\.", said[0])
    assert "nothing measured yet" in said[0]  # the time, from the file's size alone
    assert said[-1].startswith("[100%]")
    rows = json.loads(measure_run.stdout)["modes"]
    quantized = [r for r in rows if r["kv"] != "f16/f16"]
    assert {r["kv"] for r in quantized} == set(measured)  # every one measured, none lent
    assert all(r["scored_tokens"] == 63 for r in quantized)  # 128 tokens, the second half
    # Without --measure the next advice finds the same figures in the store, where before the
    # measurement it had none.
    again = {r["kv"]: r for r in advise_json(env)["modes"]}
    for row in quantized:
        assert again[row["kv"]]["quality_source"] == "measured"
        assert again[row["kv"]]["mean_kl_divergence"] == row["mean_kl_divergence"]
    assert all(r["quality_source"] == "unknown" for r in before["modes"] if r["kv"] != "f16/f16")


def test_a_stored_measurement_picks_a_quantized_mode_that_loads(env, before, measured) -> None:
    after = advise_json(env, "--max-kl", loose_budget(measured))
    choice = after["choice"]
    assert choice["kv"] != "f16/f16" and choice["n_ctx"] > before["choice"]["n_ctx"]
    row = next(r for r in after["modes"] if r["kv"] == choice["kv"])
    assert row["quality_source"] == "measured" and row["mean_kl_divergence"] == pytest.approx(
        measured[choice["kv"]], abs=1e-9
    )
    assert row["decode_tokens_per_second"] > 0 and row["speed_source"] == "measured"
    # The context it says fits loads in the real engine, under the same cap.
    kv = f"{choice['type_k']}/{choice['type_v']}"
    args = (
        "--ctx",
        str(choice["n_ctx"]),
        "--kv",
        kv,
        "--threads",
        str(ENGINE_THREADS),
        "-n",
        "2",
        "--json",
    )
    run = kvstudio("run", "starter", "-p", "Once upon", *args, env=env)
    assert run.returncode == 0, run.stderr
    loaded = json.loads(run.stdout)
    assert (loaded["kv_mode"], loaded["n_ctx"]) == (kv, choice["n_ctx"])


def test_a_strict_quality_budget_keeps_f16(env, measured) -> None:
    strict = advise_json(env, "--max-kl", "0")
    assert strict["choice"]["kv"] == "f16/f16"
    assert all(not r["within_budget"] for r in strict["modes"] if r["kv"] != "f16/f16")


def test_the_measurement_time_comes_from_the_measured_speed(env, measured, starter_model_path):
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        steps = measurement_steps(starter_model_path)
        store = MeasurementStore(Path(env["KVSTUDIO_DATA_DIR"]))
        kept = store.for_model(store.sha256(starter_model_path))
    assert steps.rates.source == "this model's measured decode speed"
    assert kept is not None
    fastest = max(m.decode_tokens_per_second or 0 for m in kept.modes)
    assert steps.rates.decode_tokens_per_second == fastest and steps.total_seconds > 0


def _check_shape(value: object, hint: object, where: str) -> None:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if typing.is_typeddict(hint):
        assert isinstance(value, dict) and set(value) == set(hint.__annotations__), where
        for key, sub in typing.get_type_hints(hint).items():
            _check_shape(value[key], sub, f"{where}.{key}")
    elif origin in (typing.Union, types.UnionType):
        errors = []
        for option in args:
            try:
                _check_shape(value, option, where)
                return
            except AssertionError as error:
                errors.append(error)
        raise AssertionError(f"{where}: {value!r} is none of {args}")
    elif origin is list:
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            _check_shape(item, args[0], f"{where}[{i}]")
    elif hint is type(None):
        assert value is None, where
    elif hint is float:
        assert isinstance(value, int | float) and not isinstance(value, bool), where
    else:
        assert isinstance(value, hint) and not (hint is int and isinstance(value, bool)), where


def test_the_json_keeps_its_documented_schema(env, measured) -> None:
    report = advise_json(env, "--max-kl", loose_budget(measured), "--context", "2048")
    _check_shape(report, AdviceReport, "advice")
    assert report["context"] == 2048 and report["choice"]["n_ctx"] == 2048
    documented = (ROOT / "docs" / "advisor.md").read_text(encoding="utf-8")
    fields = set(typing.get_type_hints(AdviceReport))
    for nested in ("modes", "choice"):
        fields |= set(report[nested][0] if nested == "modes" else report[nested])
    missing = sorted(f for f in fields if f"`{f}`" not in documented)
    assert not missing, f"docs/advisor.md does not describe {missing}"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--max-kl", "-1"), "--max-kl must be 0 or more"),
        (("--max-kl", "lots"), "--max-kl must be a number"),
        (("--context", "0"), "--context must be a positive number"),
        (("--context", "99999999"), "beyond this model's trained context"),
        (("--chunks", "2"), "--chunks and --chunk-tokens size a measurement: add --measure"),
        (("--measure", "--chunk-tokens", "16"), "--chunk-tokens must be 64 or more"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(env, args, words) -> None:
    assert_bad_input(kvstudio("advise", "starter", *args, env=env), words)


def test_a_missing_model_is_one_sentence(env, tmp_path) -> None:
    assert_bad_input(kvstudio("advise", str(tmp_path / "none.gguf"), env=env), "none.gguf")


def test_the_load_dialogs_auto_gives_the_cli_s_choice(
    qtbot, env, measured, monkeypatch, starter_model_path
):
    from PySide6.QtCore import Qt

    from app.ui.chat.load_dialog import LoadDialog

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    cli = advise_json(env)["choice"]  # the default budget, as Auto uses it
    dialog = LoadDialog("starter", Settings(), Path(env["KVSTUDIO_DATA_DIR"]))
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.kv_choice.advice is not None, timeout=HANG_GUARD_MS)
    box = dialog.kv_choice.mode_box
    assert box.itemText(0).startswith(f"Auto: {cli['kv']} at {cli['n_ctx']:,} tokens")
    assert "Rule:" in box.itemData(0, Qt.ItemDataRole.ToolTipRole)  # the tooltip says why
    box.activated.emit(0)  # the user picks Auto
    chosen = dialog.chosen()
    assert (chosen.kv.label, chosen.n_ctx) == (cli["kv"], cli["n_ctx"])
    assert dialog.fit is not None and dialog.fit.refusal is None  # and it fits
    # The fit line's "at most" has no margin, Auto keeps 10%: the line says both, and why.
    mode_fit = dialog.fit.mode_fit
    assert mode_fit.largest_n_ctx_with_margin == cli["n_ctx"] < mode_fit.largest_n_ctx
    assert (
        f"At most {mode_fit.largest_n_ctx:,} tokens fit with these settings, "
        f"{cli['n_ctx']:,} with the estimate's 10% kept spare (as Auto keeps it)."
    ) in dialog.fit_label.text()
    # Below Auto, each mode with its share of the f16 KV memory (the KV arithmetic's, for
    # this model); every other K and V type is under More.
    header = read_gguf_header(starter_model_path)
    f16 = kv_cache_bytes(header, 4096, FP16_KV_MODE).total_bytes
    for mode in KV_MODES:
        share = kv_cache_bytes(header, 4096, mode).total_bytes / f16
        text = box.itemText(box.findData(mode.label))
        assert text.startswith(mode.label) and text.endswith(f"{share:.0%} of the f16 KV memory")
    box.activated.emit(box.count() - 1)  # "Other K and V types (under More)"
    assert dialog.kv_choice.more.isVisible()
    assert dialog.kv_choice.type_k.count() == dialog.kv_choice.type_v.count() == len(KV_TYPES)
    dialog.reject()


def test_a_sibling_model_lends_its_measured_quality_as_an_estimate(tmp_path, monkeypatch):
    """Two tiny random models of one family (same shapes, other weights): one measured for
    real, the other advised from it, marked as an estimate."""
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(tmp_path / "data"))
    first = write_model(tmp_path / "tiny-a.gguf", 2, "small", None, seed=1)
    second = write_model(tmp_path / "tiny-b.gguf", 2, "small", None, seed=2)
    measure_for_advice(first, QUICK, n_threads=ENGINE_THREADS)
    result = kvstudio(
        "advise", str(second), "--json", env={"KVSTUDIO_DATA_DIR": str(tmp_path / "data")}
    )
    assert result.returncode == 0, result.stderr
    rows = {r["kv"]: r for r in json.loads(result.stdout)["modes"]}
    assert rows["q8_0/f16"]["quality_source"] == "estimate"
    assert rows["q8_0/f16"]["quality_from_model"] == "tiny-a.gguf"
    assert rows["q8_0/f16"]["decode_tokens_per_second"] is None  # speed is the file's own
