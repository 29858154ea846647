"""Memory and KV cache per device for a model split across RPC workers (the dashboard's
per-device view): each device's free and total memory as llama.cpp read it after the load,
and the KV cache llama.cpp allocated on it next to what f16/f16 would take there.

llama.cpp logs one "<buffer> KV buffer size = X MiB" per cache and device; a worker's buffer
is named "RPCn[host:port]" (the address identifies the device), this machine's "CPU". Within
one cache every layer has the same K/V row widths on the models llama.cpp splits this way, so
a device's f16/f16 bytes are its bytes scaled by that cache's f16/f16 to allocated ratio."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.kv.split_device import SplitDevice

MIB = 1024 * 1024


@dataclass(frozen=True)
class DeviceRow:
    """One device of a split load, as the dashboard shows it."""

    label: str  # "CPU (this machine)", "RPC0 (127.0.0.1:50052)"
    free_bytes: int
    total_bytes: int
    kv_mib: float  # the KV cache llama.cpp allocated here, all caches, as it printed them
    kv_f16_mib: float | None  # the same cells at f16/f16; None without the KV arithmetic

    @property
    def used_bytes(self) -> int:
        return max(self.total_bytes - self.free_bytes, 0)

    @property
    def reports_free(self) -> bool:
        """False for a CPU device: llama.cpp's CPU backend reports the machine's whole RAM as
        both free and total (a worker's CPU device too), so nothing it holds shows as used."""
        return self.free_bytes < self.total_bytes


def _device_of(buffer: str, devices: Sequence[SplitDevice]) -> int | None:
    """The index in `devices` of the device a KV buffer name belongs to."""
    if "[" in buffer and buffer.endswith("]"):
        address = buffer[buffer.index("[") + 1 : -1]
        return next((i for i, d in enumerate(devices) if d.description == address), None)
    return next((i for i, d in enumerate(devices) if d.name == buffer), None)


def device_rows(
    devices: Sequence[SplitDevice],
    caches: Sequence[tuple[Sequence[str], Sequence[float]]],
    f16_ratios: Sequence[float] | None,
) -> list[DeviceRow]:
    """A row per device: `caches` are each cache's (buffer names, MiB as printed) in the log's
    order; `f16_ratios` each cache's f16/f16 bytes over its allocated bytes (same order)."""
    kv = [0.0] * len(devices)
    kv16: list[float | None] = [0.0 if f16_ratios is not None else None] * len(devices)
    for index, (buffers, mibs) in enumerate(caches):
        for buffer, mib in zip(buffers, mibs, strict=False):
            at = _device_of(buffer, devices)
            if at is None:
                continue
            kv[at] += mib
            current = kv16[at]
            if current is not None and f16_ratios is not None and index < len(f16_ratios):
                kv16[at] = current + mib * f16_ratios[index]
    return [
        DeviceRow(d.label, d.free_bytes, d.total_bytes, round(kv[i], 2), kv16[i])
        for i, d in enumerate(devices)
    ]
