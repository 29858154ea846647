"""Results of a KV mode comparison: one ModeResult per mode, exportable as CSV and JSON,
and the plain-text table `kvstudio bench` prints. No Qt, no llama_cpp."""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

from app.engine.llama_switches import switches_set
from app.engine.messages import BenchDone, ComputeBufferInfo, Evaluated, Loaded
from app.kv.kv_types import FP16_KV_MODE, KvMode
from app.platform.recording import Recording, RecordingFile
from app.platform.safe_text import safe_text
from app.platform.text_table import aligned_rows

MIB = 1024 * 1024


@dataclass
class ModeResult:
    mode: KvMode
    k_type: str
    v_type: str
    n_ctx: int = 0  # as llama.cpp created it
    kv_allocated_bytes: int = 0  # sum of every llama_kv_cache line (global + sliding window)
    k_bytes: int = 0
    v_bytes: int = 0
    kv_allocated_mib: float = 0.0  # llama.cpp's printed MiB figures, summed
    k_mib: float = 0.0
    v_mib: float = 0.0
    # each compute buffer as llama.cpp printed it ("CUDA0", "CUDA_Host", "CPU"): kept by name to
    # show which side of the PCIe bus a difference between two modes' buffers lies on
    compute_buffers: tuple[ComputeBufferInfo, ...] = ()
    load_seconds: float = 0.0
    baseline_memory_bytes: int | None = None  # engine started, nothing loaded
    memory_after_load_bytes: int | None = None
    memory_at_end_bytes: int | None = None
    peak_memory_bytes: int | None = None  # highest sample while loading and measuring speed
    peak_device_memory_bytes: int | None = None  # the whole device then (nvidia-smi's figure)
    prompt_tokens_per_second: float | None = None
    decode_tokens_per_second: float | None = None
    fill_seconds: float | None = None
    decode_spread_percent: float | None = None  # (slowest - fastest) / median repetition
    perplexity: float | None = None
    mean_kl_divergence: float | None = None  # vs f16/f16; 0 for f16/f16 itself
    top1_agreement: float | None = None
    scored_tokens: int = 0
    cpu_load: float | None = None  # 1-minute load average after the speed run
    warnings: tuple[str, ...] = ()
    kv_lines: tuple[str, ...] = ()  # llama.cpp's own log lines
    fa_kernel: str = ""  # the backend's Flash Attention GPU kernels (Loaded.fa_kernel)
    switches: tuple[tuple[str, str], ...] = ()  # Loaded.switches

    def apply_loaded(self, loaded: Loaded) -> None:
        self.n_ctx = loaded.n_ctx
        self.fa_kernel = loaded.fa_kernel
        self.switches = loaded.switches
        self.load_seconds = loaded.load_seconds
        self.kv_allocated_bytes = sum(c.total_bytes for c in loaded.kv_caches)
        self.k_bytes = sum(c.k_bytes for c in loaded.kv_caches)
        self.v_bytes = sum(c.v_bytes for c in loaded.kv_caches)
        self.kv_allocated_mib = round(sum(c.total_mib for c in loaded.kv_caches), 2)
        self.k_mib = round(sum(c.k_mib for c in loaded.kv_caches), 2)
        self.v_mib = round(sum(c.v_mib for c in loaded.kv_caches), 2)
        self.compute_buffers = loaded.compute_buffers
        self.kv_lines = tuple(c.line for c in loaded.kv_caches)
        self.warnings = tuple(f"{w.kind}: {w.text}" for w in loaded.warnings)

    @property
    def compute_buffer_bytes(self) -> int:
        return sum(b.bytes for b in self.compute_buffers)

    def apply_bench(self, done: BenchDone) -> None:
        self.prompt_tokens_per_second = done.prompt_tokens_per_second
        self.decode_tokens_per_second = done.decode_tokens_per_second
        self.fill_seconds = done.fill_seconds
        each = done.decode_seconds_each
        if len(each) >= 2:
            self.decode_spread_percent = 100 * (max(each) - min(each)) / statistics.median(each)

    def apply_evaluated(self, evaluated: Evaluated) -> None:
        self.perplexity = evaluated.perplexity
        self.scored_tokens = evaluated.scored_tokens
        self.mean_kl_divergence = (
            evaluated.mean_kl_divergence if evaluated.mean_kl_divergence is not None else 0.0
        )
        self.top1_agreement = (
            evaluated.top1_agreement if evaluated.top1_agreement is not None else 1.0
        )


class CompareRow(TypedDict):
    """One mode's figures as the table, the CSV, the JSON's "modes" and a recording's
    "results" hold them (MiB, tokens/s, percent; None where not measured)."""

    mode: str  # the mode's label
    n_ctx: int
    kv_allocated_mib: float
    k_mib: float
    v_mib: float
    kv_allocated_bytes: int
    compute_buffer_mib: float
    peak_memory_mib: float | None
    peak_device_memory_mib: float | None
    memory_after_load_mib: float | None
    kv_saving_mib: float | None
    kv_saving_percent: float | None
    peak_saving_mib: float | None
    peak_saving_of_kv_saving_percent: float | None
    prompt_tokens_per_second: float | None
    decode_tokens_per_second: float | None
    decode_spread_percent: float | None  # how much the speed run's repetitions varied
    perplexity: float | None
    mean_kl_divergence: float | None
    top1_agreement: float | None
    scored_tokens: int  # the quality figures rest on this many tokens
    load_seconds: float
    cpu_load: float | None
    warnings: str  # joined with "; "


class SavedComparison(TypedDict):
    """A comparison as `kvstudio bench --json` writes it (CompareResult.to_dict)."""

    model: str
    n_ctx: int
    depth: int
    n_prompt: int
    n_gen: int
    quality_chunks: int
    chunk_tokens: int
    probe: str
    probe_limits: str
    device: str
    fa_kernel: str
    seconds: float
    modes: list[CompareRow]
    kv_lines: dict[str, list[str]]  # by mode label
    compute_buffers: NotRequired[dict[str, dict[str, float]]]  # mode label -> buffer -> MiB
    llama_switches: NotRequired[dict[str, str]]  # app.engine.llama_switches set for the run
    recording: NotRequired[RecordingFile]


def _by_buffer(buffers: Sequence[ComputeBufferInfo]) -> dict[str, float]:
    """MiB per buffer name; a name printed twice (one per reserve) is summed, as the total is."""
    out: dict[str, float] = {}
    for buffer in buffers:
        out[buffer.device] = round(out.get(buffer.device, 0.0) + buffer.mib, 2)
    return out


def run_title(data: Mapping[str, object]) -> str:
    """A comparison's one-line title, from its saved form (to_dict, or a recording's
    metadata): model, n_ctx, depth, where memory was read, and the GPU kernels the speeds
    come from. A saved run is a file like any other, so its words are cleaned."""

    def number(key: str) -> str:
        value = data.get(key)
        return f"{value:,}" if isinstance(value, int) else "?"

    model = safe_text(Path(str(data.get("model", ""))).name, 120)
    where = safe_text(str(data.get("device") or data.get("probe") or "unknown device"), 80)
    kernel = safe_text(str(data.get("fa_kernel") or ""), 40)
    switches = switches_set(data.get("llama_switches"))
    return (
        f"{model} - n_ctx {number('n_ctx')}, depth {number('depth')} - {where}"
        + (f" - FA kernels: {kernel}" if kernel else "")
        + (" - with " + ", ".join(f"{n}={v}" for n, v in switches) if switches else "")
    )


# (row key, table heading, format)
COLUMNS = (
    ("mode", "mode", "{}"),
    ("kv_allocated_mib", "KV alloc MiB", "{:,.2f}"),
    ("peak_memory_mib", "peak MiB", "{:,.1f}"),
    ("peak_saving_mib", "saved vs f16 MiB", "{:,.1f}"),
    ("kv_saving_percent", "KV saved %", "{:.1f}"),
    ("prompt_tokens_per_second", "pp t/s", "{:,.1f}"),
    ("decode_tokens_per_second", "tg t/s", "{:,.2f}"),
    ("perplexity", "PPL", "{:.3f}"),
    ("mean_kl_divergence", "KLD", "{:.5f}"),
    ("top1_agreement", "top-1 %", "{:.2f}"),
)


@dataclass
class CompareResult:
    model_path: str
    n_ctx: int
    depth: int
    n_prompt: int
    n_gen: int
    quality_chunks: int
    chunk_tokens: int
    probe: str
    device: str
    probe_limits: str = ""
    modes: list[ModeResult] = field(default_factory=list)
    recording: Recording | None = None
    seconds: float = 0.0

    @property
    def fa_kernel(self) -> str:
        """The Flash Attention GPU kernels the speeds were measured with (every mode runs on
        the same backend); "" without CUDA/HIP kernels."""
        return next((m.fa_kernel for m in self.modes if m.fa_kernel), "")

    @property
    def switches(self) -> tuple[tuple[str, str], ...]:
        """The llama.cpp switches set for the run (every mode's engine starts from the same
        environment)."""
        return next((m.switches for m in self.modes if m.switches), ())

    @property
    def reference(self) -> ModeResult | None:
        return next((m for m in self.modes if m.mode == FP16_KV_MODE), None)

    def row(self, mode: ModeResult) -> CompareRow:
        """One mode's figures with the savings against f16/f16 filled in."""
        ref = self.reference
        row: CompareRow = {
            "mode": mode.mode.label,
            "n_ctx": mode.n_ctx,
            "kv_allocated_mib": mode.kv_allocated_mib,
            "k_mib": mode.k_mib,
            "v_mib": mode.v_mib,
            "kv_allocated_bytes": mode.kv_allocated_bytes,
            "compute_buffer_mib": round(mode.compute_buffer_bytes / MIB, 2),
            "peak_memory_mib": _mib(mode.peak_memory_bytes),
            "peak_device_memory_mib": _mib(mode.peak_device_memory_bytes),
            "memory_after_load_mib": _mib(mode.memory_after_load_bytes),
            "kv_saving_mib": None,
            "kv_saving_percent": None,
            "peak_saving_mib": None,
            "peak_saving_of_kv_saving_percent": None,
            "prompt_tokens_per_second": _round(mode.prompt_tokens_per_second, 1),
            "decode_tokens_per_second": _round(mode.decode_tokens_per_second, 2),
            "decode_spread_percent": _round(mode.decode_spread_percent, 1),
            "perplexity": _round(mode.perplexity, 4),
            "mean_kl_divergence": _round(mode.mean_kl_divergence, 5),
            "top1_agreement": _round(
                None if mode.top1_agreement is None else mode.top1_agreement * 100, 2
            ),
            "scored_tokens": mode.scored_tokens,
            "load_seconds": round(mode.load_seconds, 2),
            "cpu_load": _round(mode.cpu_load, 2),
            "warnings": "; ".join(mode.warnings),
        }
        if ref is not None and ref.kv_allocated_bytes:
            kv_saving = ref.kv_allocated_bytes - mode.kv_allocated_bytes
            row["kv_saving_mib"] = round(kv_saving / MIB, 2)
            row["kv_saving_percent"] = round(100 * kv_saving / ref.kv_allocated_bytes, 2)
            if ref.peak_memory_bytes is not None and mode.peak_memory_bytes is not None:
                peak_saving = ref.peak_memory_bytes - mode.peak_memory_bytes
                row["peak_saving_mib"] = round(peak_saving / MIB, 1)
                if kv_saving:
                    row["peak_saving_of_kv_saving_percent"] = round(
                        100 * peak_saving / kv_saving, 1
                    )
        return row

    def rows(self) -> list[CompareRow]:
        return [self.row(m) for m in self.modes]

    def notes(self) -> list[str]:
        """Sentences about how far to trust the figures (shown with the table)."""
        return busy_note(self.rows())

    def to_dict(self, include_recording: bool = False) -> SavedComparison:
        data: SavedComparison = {
            "model": self.model_path,
            "n_ctx": self.n_ctx,
            "depth": self.depth,
            "n_prompt": self.n_prompt,
            "n_gen": self.n_gen,
            "quality_chunks": self.quality_chunks,
            "chunk_tokens": self.chunk_tokens,
            "probe": self.probe,
            "probe_limits": self.probe_limits,
            "device": self.device,
            "fa_kernel": self.fa_kernel,
            "seconds": round(self.seconds, 1),
            "modes": self.rows(),
            "kv_lines": {m.mode.label: list(m.kv_lines) for m in self.modes},
            "compute_buffers": {m.mode.label: _by_buffer(m.compute_buffers) for m in self.modes},
            "llama_switches": dict(self.switches),
        }
        if include_recording and self.recording is not None:
            data["recording"] = self.recording.to_dict()
        return data

    def to_json(self, include_recording: bool = False) -> str:
        return json.dumps(self.to_dict(include_recording), indent=2)

    def to_csv(self) -> str:
        rows = self.rows()
        out = io.StringIO()
        if rows:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        return out.getvalue()

    def table(self) -> str:
        return format_table(self.rows())


def busy_note(rows: Sequence[Mapping[str, object]]) -> list[str]:
    """A note when other programs kept the CPUs busy during the speed runs."""
    import os

    cpus = os.cpu_count() or 1
    loads = [float(v) for r in rows if isinstance(v := r.get("cpu_load"), (int, float))]
    if not loads or max(loads) <= cpus:
        return []
    note = (
        f"The machine was busy during the speed runs (load average up to {max(loads):.1f} "
        f"on {cpus} CPUs): the speed figures are unreliable; memory and quality are not affected."
    )
    return [note]


def format_table(rows: Sequence[Mapping[str, object]]) -> str:
    """Rows of CompareResult.rows() as an aligned plain-text table."""
    cells = [[label for _, label, _ in COLUMNS]]
    for row in rows:
        cells.append([_cell(row.get(key), fmt) for key, _, fmt in COLUMNS])
    return "\n".join(aligned_rows(cells, right=range(1, len(COLUMNS)), rule=True))


def _mib(n: int | None) -> float | None:
    return None if n is None else round(n / MIB, 1)


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


def _cell(value: object, fmt: str) -> str:
    if value is None:
        return "-"
    try:
        return fmt.format(value)
    except (TypeError, ValueError):
        return str(value)
