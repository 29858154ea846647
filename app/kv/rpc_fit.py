"""Will a model fit when llama.cpp splits it across devices (RPC workers and local GPUs), and
which device runs out first? Pure arithmetic over the GGUF header, mirroring llama.cpp 0.3.36's
llama_model_base::load_tensors (src/llama-model.cpp):

- devices in llama.cpp's order: RPC workers' devices first, then local GPUs (llama.cpp.cpp,
  llama_prepare_model_devices); the local CPU is not one of them: it keeps the input layer
  (token embeddings) and any layer not offloaded;
- split points from the user's shares (tensor_split, when any is above 0), else from each
  device's free memory: splits[i] = cumulative share / total, in float32; with
  n_gpu = n_gpu_layers (-1: n_layer + 1) and i_gpu_start = n_layer + 1 - n_gpu,
  layer il (il = n_layer is the output layer) goes to CPU when il < i_gpu_start, else to the
  first device whose split point is above float(il - i_gpu_start) / n_gpu;
- the KV cache of a layer lives on its layer's device, so each device holds its layers' rows
  of every cache (app.kv.kv_cache's arithmetic, per layer): exact, as llama.cpp logs
  "<buffer> KV buffer size" per device;
- weights: the tensors of the layers it holds (blk.N.*), the output layer's on the output
  device (token_embd duplicated there when the model ties its output to it);
- compute buffer: an estimate (app.kv.fit.compute_peaks): a device pays the peaks of the parts
  it runs; the CPU, with only the input layer, its inputs (masks, embeddings).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass

from app.kv.fit import compute_peaks, weights_bytes, with_safety
from app.kv.kv_cache import KvCacheEstimate, kv_cache_bytes
from app.kv.kv_types import KvMode
from app.kv.split_device import SplitDevice
from app.models.gguf_header import GgufHeader
from app.platform.units import size

CPU = -1  # layer_devices' index for the local CPU
_BLOCK_RE = re.compile(r"blk\.(\d+)\.")
_INPUT_TENSORS = ("token_embd.", "token_types.", "position_embd.", "per_layer_token_embd.")
_OUTPUT_TIED_TO = "token_embd.weight"
# The CPU's inputs besides the masks, in ubatch x n_embd floats: the embeddings looked up, and
# their scaled and copied forms; 8 matched the starter model split over two workers (12.3 MiB).
_HOST_EMBD_COPIES = 8


@dataclass(frozen=True)
class DeviceShare:
    """What one device holds of the model."""

    label: str  # "RPC0 (127.0.0.1:50052)", or "this machine's CPU"
    budget_bytes: int
    layers: tuple[int, ...]  # repeating layers (blk.N)
    has_output: bool
    weights_bytes: int
    kv_bytes_per_cache: tuple[int, ...]  # per cache, in llama.cpp's log order (global, SWA)
    compute_bytes: int  # estimated

    @property
    def kv_bytes(self) -> int:
        return sum(self.kv_bytes_per_cache)

    @property
    def need_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes

    @property
    def left_bytes(self) -> int:
        return self.budget_bytes - self.need_bytes


@dataclass(frozen=True)
class SplitFit:
    """Every device's share: the CPU first, then the devices in llama.cpp's order."""

    n_ctx: int
    mode: KvMode
    shares: tuple[DeviceShare, ...]

    def runs_out_first(self) -> DeviceShare:
        """The device with the least memory left after the load (negative: short of it)."""
        return min(self.shares, key=lambda share: share.left_bytes)

    @property
    def fits(self) -> bool:
        return self.runs_out_first().left_bytes >= 0

    def sentence(self) -> str:
        """One line naming the device that runs out first, with its numbers."""
        share = self.runs_out_first()
        need, free = size(share.need_bytes, 2), size(share.budget_bytes, 2)
        verb = "needs" if share.left_bytes < 0 else "would need"
        return (
            f"At {self.n_ctx:,} tokens ({self.mode.label}), {share.label} {verb} {need} "
            f"(weights {size(share.weights_bytes, 1)}, KV cache {size(share.kv_bytes, 2)}, "
            f"compute {size(share.compute_bytes, 1)}) but has {free} free"
        )


def _f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def layer_devices(n_layer: int, n_gpu_layers: int, shares: list[float]) -> list[int]:
    """The device index (into `shares`, llama.cpp's device order: each device's free memory,
    or the user's split) of layers 0..n_layer, the last being the output layer; CPU where a
    layer stays on this machine's CPU."""
    n_gpu = n_gpu_layers if n_gpu_layers >= 0 else n_layer + 1
    i_gpu_start = max(n_layer + 1 - n_gpu, 0)
    act_gpu_layers = min(n_gpu, n_layer + 1) if shares else 0
    points, running = [], 0.0
    for share in shares:  # float32 sums, as llama.cpp's std::vector<float>
        running = _f32(running + _f32(float(share)))
        points.append(running)
    points = [_f32(p / running) if running else 0.0 for p in points]
    placed = []
    for il in range(n_layer + 1):
        if il < i_gpu_start or il - i_gpu_start >= act_gpu_layers:
            placed.append(CPU)
            continue
        at = _f32(float(il - i_gpu_start) / act_gpu_layers)
        # std::upper_bound: the first split point strictly above `at`
        index = next((i for i, p in enumerate(points) if p > at), len(points))
        placed.append(min(index, len(points) - 1))
    return placed


def split_fit(
    header: GgufHeader,
    n_ctx: int,
    kv_mode: KvMode | str,
    devices: list[SplitDevice],
    host_budget_bytes: int,
    *,
    n_gpu_layers: int = -1,
    n_ubatch: int = 512,
    swa_full: bool = False,
    flash_attn: bool = True,
    file_size: int | None = None,
    layer_split: tuple[float, ...] = (),
) -> SplitFit:
    """Each device's weights, KV cache and compute buffer when llama.cpp splits `header`'s model
    over `devices` (llama.cpp's order) at `n_ctx` with K/V `kv_mode`, by `layer_split` when it
    has a share above 0, else by free memory; the CPU's share first."""
    kv = kv_cache_bytes(
        header, n_ctx, kv_mode, n_ubatch=n_ubatch, swa_full=swa_full, flash_attn=flash_attn
    )
    n_layer = header.block_count
    by_user = any(share > 0 for share in layer_split)
    # llama.cpp reads one share per device from a zero-padded array
    padded = (list(layer_split) + [0.0] * len(devices))[: len(devices)]
    split_by = padded if by_user else [float(d.free_bytes) for d in devices]
    placed = layer_devices(n_layer, n_gpu_layers, split_by)
    weights = _weights_by_place(header, placed, file_size)
    kv_by_place = _kv_by_place(kv, placed)
    peaks = compute_peaks(header, kv, on_gpu=bool(devices), flash_attn=flash_attn)
    host_inputs = 2 * peaks.mask + _HOST_EMBD_COPIES * kv.n_ubatch * header.embedding_length * 4
    output_buffer = (header.vocab_size or 0) * 4  # the logits of one sequence, on the CPU
    shares = []
    places = [(CPU, "this machine's CPU", host_budget_bytes)]
    places += [(i, d.label, d.budget) for i, d in enumerate(devices)]
    for place, label, budget in places:
        layers = tuple(il for il in range(n_layer) if placed[il] == place)
        has_output = placed[n_layer] == place
        peak = max(peaks.layer if layers else 0, peaks.output if has_output else 0)
        compute = with_safety(peak)
        if place == CPU:
            compute = max(compute, with_safety(host_inputs)) + output_buffer
        elif not (layers or has_output):
            compute = 0
        shares.append(
            DeviceShare(
                label=label,
                budget_bytes=budget,
                layers=layers,
                has_output=has_output,
                weights_bytes=weights.get(place, 0),
                kv_bytes_per_cache=kv_by_place.get(place, tuple(0 for _ in kv.caches)),
                compute_bytes=compute,
            )
        )
    return SplitFit(n_ctx, kv.mode, tuple(shares))


def _weights_by_place(
    header: GgufHeader, placed: list[int], file_size: int | None
) -> dict[int, int]:
    n_layer = len(placed) - 1
    output_place = placed[n_layer]
    by_place: dict[int, int] = {}
    names = {t.name for t in header.tensors}
    for tensor in header.tensors:
        block = _BLOCK_RE.match(tensor.name)
        if block is not None:
            index = int(block.group(1))
            place = placed[index] if index < n_layer else output_place  # nextn layers: output
        elif tensor.name.startswith(_INPUT_TENSORS):
            place = CPU
        else:
            place = output_place  # output.weight, output_norm.weight, ...
        by_place[place] = by_place.get(place, 0) + tensor.n_bytes
    if "output.weight" not in names and _OUTPUT_TIED_TO in names and output_place != CPU:
        tied = next(t for t in header.tensors if t.name == _OUTPUT_TIED_TO)
        by_place[output_place] = by_place.get(output_place, 0) + tied.n_bytes
    # A split model's first part lists only its own tensors: the rest, unseen, is counted on
    # the device that holds the most (an estimate, like the Models page's).
    unseen = weights_bytes(header, file_size) - header.tensor_data_bytes
    if unseen > 0:
        biggest = max(by_place, key=lambda place: by_place[place])
        by_place[biggest] += unseen
    return by_place


def _kv_by_place(kv: KvCacheEstimate, placed: list[int]) -> dict[int, tuple[int, ...]]:
    """Per place, the KV bytes of each cache (global, then SWA) of the layers it holds."""
    layout = kv.layout
    if layout is None:
        return {}
    result: dict[int, list[int]] = {}
    mode = kv.mode
    for index, cache in enumerate(kv.caches):
        layers = layout.cache_layers(cache.swa) if layout.has_swa else layout.layers
        for layer in layers:
            v_width = layer.n_embd_v_gqa if _flash_attn(kv) else layout.n_embd_v_gqa_max
            per_cell = mode.k.row_bytes(layer.n_embd_k_gqa) + mode.v.row_bytes(v_width)
            row = result.setdefault(placed[layer.index], [0] * len(kv.caches))
            row[index] += per_cell * cache.n_stream * cache.cells
    return {place: tuple(row) for place, row in result.items()}


def _flash_attn(kv: KvCacheEstimate) -> bool:
    return bool((kv.options or {}).get("flash_attn", True))


def largest_split_context(fits_at: Callable[[int], bool], limit: int) -> int:
    """The largest multiple of 256 up to `limit` for which `fits_at(n_ctx)` holds (the need
    grows with the context on every device); 0 when not even 256 does."""
    step = 256
    lo, hi = 0, max(1, limit // step)
    if fits_at(hi * step):
        return hi * step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits_at(mid * step):
            lo = mid
        else:
            hi = mid
    return lo * step
