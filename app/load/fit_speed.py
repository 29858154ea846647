"""How fast a model file would decode on this machine, and which quantization of a repo to take.

Decoding one token reads every weight once and the KV cache of the tokens so far, so its speed
is bounded by memory bandwidth: tokens/s ~ bandwidth / (weights + KV at the context). The
bandwidth is measured when a model has decoded here (its decode tokens/s x the bytes it read
per token), else a stated default for the device kind (DEFAULT_BANDWIDTH). The figure is an
estimate of the order of magnitude, meant to tell 40 tokens/s from 2, not 40 from 35.

    bandwidth = measured_bandwidth(22.0, weights_bytes=253e6, kv_bytes=4e6, on_gpu=False)
    speed = estimate_speed(weights_bytes, mode_fit.kv_bytes, bandwidth)
    speed.slow                                    # under SLOW_TOKENS_PER_SECOND
    recommended_file(candidates, bandwidth)       # the largest file that fits and is not slow
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.kv.fit import FITS, FitEstimate
from app.platform import units as fmt

# Under this a reply of a few hundred tokens takes minutes: the file fits but is no pleasure.
SLOW_TOKENS_PER_SECOND = 5.0
# Bytes per second a decode reads, when nothing has been measured here: a desktop's dual-channel
# DDR4/DDR5 reaches about 20 GB/s in practice; 300 GB/s is a mid-range discrete GPU's memory.
DEFAULT_BANDWIDTH = {False: 20e9, True: 300e9}


@dataclass(frozen=True)
class Bandwidth:
    """Bytes per second a decode reads on one kind of device, and where the figure comes from."""

    bytes_per_second: float
    on_gpu: bool
    measured: str = ""  # what measured it ("gemma-3-270m at 22.3 tokens/s"); "" for the default

    def describe(self) -> str:
        """One clause for a tooltip: the figure and its source."""
        rate = f"{self.bytes_per_second / 1e9:.1f} GB/s"
        if self.measured:
            return f"{rate}, measured from {self.measured}"
        device = "GPU" if self.on_gpu else "system RAM"
        return f"{rate}, the usual {device} figure (nothing measured here yet)"


def default_bandwidth(on_gpu: bool) -> Bandwidth:
    return Bandwidth(DEFAULT_BANDWIDTH[on_gpu], on_gpu)


def measured_bandwidth(
    decode_tokens_per_second: float, weights_bytes: int, kv_bytes: int, on_gpu: bool, what: str
) -> Bandwidth | None:
    """The bandwidth a real decode showed: its tokens/s x the bytes it read per token (the
    weights and the KV cache in use). None when the decode says nothing (no speed)."""
    if decode_tokens_per_second <= 0 or weights_bytes <= 0:
        return None
    bytes_per_second = decode_tokens_per_second * (weights_bytes + max(0, kv_bytes))
    return Bandwidth(bytes_per_second, on_gpu, f"{what} at {decode_tokens_per_second:.1f} tokens/s")


def kv_bytes_in_use(caches: Iterable[tuple[int, int]], n_past: int) -> int:
    """The KV bytes a decode at `n_past` tokens reads, of caches given as (bytes, cells): a
    cache holds at most its cells (a sliding-window cache, its window)."""
    return sum(total * min(max(0, n_past), cells) // cells for total, cells in caches if cells > 0)


@dataclass(frozen=True)
class SpeedEstimate:
    tokens_per_second: float
    bandwidth: Bandwidth

    @property
    def slow(self) -> bool:
        return self.tokens_per_second < SLOW_TOKENS_PER_SECOND

    def describe(self) -> str:
        """'about 38 tokens/s' (whole numbers from 10, one decimal under)."""
        return f"about {self._number()} tokens/s"

    def short(self) -> str:
        """'38 tok/s' (as the chat's numbers say it), for a narrow column whose tooltip says
        it is an estimate."""
        return f"{self._number()} tok/s"

    def _number(self) -> str:
        n = self.tokens_per_second
        return f"{n:.0f}" if n >= 10 else f"{n:.1f}"


def estimate_speed(weights_bytes: int, kv_bytes: int, bandwidth: Bandwidth) -> SpeedEstimate:
    """Decode speed with `weights_bytes` of weights and `kv_bytes` of KV cache read per token."""
    read = max(1, weights_bytes + max(0, kv_bytes))
    return SpeedEstimate(bandwidth.bytes_per_second / read, bandwidth)


def bandwidth_for(fit: FitEstimate, measured: Bandwidth | None) -> Bandwidth:
    """The measured bandwidth when it was measured on the kind of device `fit` is for, else the
    default for that kind (a CPU's decode says nothing about a GPU's memory)."""
    if measured is not None and measured.on_gpu == fit.budget.on_gpu:
        return measured
    return default_bandwidth(fit.budget.on_gpu)


def best_speed(fit: FitEstimate, bandwidth: Bandwidth) -> SpeedEstimate | None:
    """The fastest speed among the KV modes that fit (FITS) at the estimate's context."""
    speeds = [
        estimate_speed(fit.weights_bytes, m.kv_bytes, bandwidth)
        for m in fit.modes
        if m.verdict == FITS
    ]
    return max(speeds, key=lambda s: s.tokens_per_second, default=None)


def recommended_file(
    candidates: Iterable[tuple[str, int, FitEstimate]], measured: Bandwidth | None
) -> str | None:
    """Of (file, its size, its fit) the largest file (more bits per weight: closer to the
    original model) that fits in some KV mode and stays at SLOW_TOKENS_PER_SECOND or above;
    None when none does."""
    best: tuple[int, str] | None = None
    for name, size, fit in candidates:
        speed = best_speed(fit, bandwidth_for(fit, measured))
        if speed is not None and not speed.slow and (best is None or size > best[0]):
            best = (size, name)
    return best[1] if best else None


def speed_sentence(fit: FitEstimate, speed: SpeedEstimate) -> str:
    """A tooltip's sentence on the speed estimate and what it rests on."""
    return (
        f"Decode {speed.describe()} on this machine: {fmt.size(fit.weights_bytes)} of weights "
        f"and the KV cache read per token at {speed.bandwidth.describe()}."
    )
