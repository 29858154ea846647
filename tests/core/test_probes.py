"""Memory probes: AMD sysfs on a fake /sys/class/drm tree, NVML where a driver exists,
psutil for real."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.platform.probes import AmdSysfsProbe, PsutilProbe, detect_probe
from app.platform.probes.amd_sysfs import AmdSysfsUnavailableError, amd_cards
from app.platform.probes.nvml import NvmlProbe, NvmlUnavailableError

GIB = 1024**3
PCI = "0000:03:00.0"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fake_sysfs(root: Path, vram_used: int = 3 * GIB, vram_total: int = 24 * GIB) -> Path:
    """A tree laid out like the real one: /sys/class/drm/cardN are links into
    /sys/devices/..., and cardN/device links to the PCI device folder that holds amdgpu's
    mem_info_* files (decimal bytes and a newline). card0 is an Intel iGPU without them;
    connectors (card1-DP-1) and render nodes sit next to the cards."""
    devices = root / "devices" / "pci0000:00"
    amd = devices / "0000:00:01.0" / PCI
    for name, value in {
        "mem_info_vram_used": vram_used,
        "mem_info_vram_total": vram_total,
        "mem_info_gtt_used": 512 * 1024**2,
        "mem_info_gtt_total": 16 * GIB,
        "mem_info_vis_vram_used": vram_used,
        "mem_info_vis_vram_total": 256 * 1024**2,
    }.items():
        _write(amd / name, f"{value}\n")
    _write(amd / "product_name", "AMD Radeon RX 7900 XTX\n")
    _write(amd / "vendor", "0x1002\n")
    intel = devices / "0000:00:02.0"
    _write(intel / "vendor", "0x8086\n")

    drm = root / "class" / "drm"
    drm.mkdir(parents=True)
    for card, device in (("card0", intel), ("card1", amd)):
        node = device / "drm" / card
        node.mkdir(parents=True)
        (node / "device").symlink_to(os.path.relpath(device, node))
        _write(node / "dev", "226:0\n")
        (drm / card).symlink_to(os.path.relpath(node, drm))
    connector = amd / "drm" / "card1" / "card1-DP-1"
    connector.mkdir()
    (drm / "card1-DP-1").symlink_to(os.path.relpath(connector, drm))
    render = amd / "drm" / "renderD128"
    render.mkdir()
    (drm / "renderD128").symlink_to(os.path.relpath(render, drm))
    _write(drm / "version", "drm 1.1.0 20060810\n")
    return drm


def fake_fdinfo(proc: Path, pid: int) -> None:
    fdinfo = proc / str(pid) / "fdinfo"
    amd = (
        "drm-driver:\tamdgpu\n"
        "drm-pdev:\t{pdev}\n"
        "drm-client-id:\t{client}\n"
        "drm-memory-vram:\t{kib} KiB\n"
        "drm-memory-gtt: \t2048 KiB\n"
    )
    _write(fdinfo / "0", "pos:\t0\nflags:\t02\nmnt_id:\t24\n")  # not a DRM fd
    _write(fdinfo / "5", "pos:\t0\n" + amd.format(pdev=PCI, client=42, kib=1_048_576))
    _write(
        fdinfo / "6", "pos:\t0\n" + amd.format(pdev=PCI, client=42, kib=1_048_576)
    )  # same client again
    _write(fdinfo / "7", "pos:\t0\n" + amd.format(pdev=PCI, client=43, kib=2048))
    _write(
        fdinfo / "8", "pos:\t0\n" + amd.format(pdev="0000:0a:00.0", client=44, kib=999_999)
    )  # other GPU
    _write(fdinfo / "9", "drm-driver:\ti915\ndrm-client-id:\t7\ndrm-total-local0:\t100 KiB\n")


def test_sysfs_probe_reads_the_amd_card(tmp_path):
    drm = fake_sysfs(tmp_path / "sys")
    assert [c.name for c in amd_cards(drm)] == ["card1"]
    probe = AmdSysfsProbe(root=str(drm), proc_root=str(tmp_path / "proc"))
    assert probe.card == "card1" and probe.device == "AMD Radeon RX 7900 XTX"
    sample = probe.sample(None)
    assert (sample.device_used, sample.device_total) == (3 * GIB, 24 * GIB)
    assert (sample.gtt_used, sample.gtt_total) == (512 * 1024**2, 16 * GIB)
    assert sample.device_free == 21 * GIB
    assert sample.process_used is None


def test_sysfs_probe_follows_the_live_numbers(tmp_path):
    drm = fake_sysfs(tmp_path / "sys")
    probe = AmdSysfsProbe(root=str(drm))
    before = probe.sample().device_used
    (drm / "card1" / "device" / "mem_info_vram_used").write_text(f"{7 * GIB}\n")
    assert (before, probe.sample().device_used) == (3 * GIB, 7 * GIB)


def test_sysfs_probe_reads_process_vram_from_fdinfo(tmp_path):
    drm = fake_sysfs(tmp_path / "sys")
    fake_fdinfo(tmp_path / "proc", 4321)
    probe = AmdSysfsProbe(root=str(drm), proc_root=str(tmp_path / "proc"))
    # Client 42 once (two fds), client 43; the other GPU's and the Intel fd are left out.
    assert probe.sample(4321).process_used == GIB + 2048 * 1024
    assert probe.sample(9999).process_used is None  # no such process


def test_sysfs_probe_without_an_amd_card(tmp_path):
    drm = fake_sysfs(tmp_path / "sys")
    for name in ("mem_info_vram_used", "mem_info_vram_total"):
        (drm / "card1" / "device" / name).unlink()
    with pytest.raises(AmdSysfsUnavailableError):
        AmdSysfsProbe(root=str(drm))
    with pytest.raises(AmdSysfsUnavailableError):
        AmdSysfsProbe(root=str(tmp_path / "nothing"))


def test_detect_picks_sysfs_when_no_nvidia_or_amdsmi(tmp_path):
    drm = fake_sysfs(tmp_path / "sys")
    probe = detect_probe(sysfs_root=str(drm))
    if probe.name in ("NVML", "amdsmi"):
        pytest.skip(f"this machine has {probe.name}, which detect_probe rightly prefers")
    assert probe.name == "AMD sysfs" and "RX 7900 XTX" in probe.why


def test_detect_falls_back_to_psutil_and_says_why(tmp_path):
    probe = detect_probe(sysfs_root=str(tmp_path / "no_drm"))
    if probe.name != "psutil":
        pytest.skip(f"this machine has a GPU probe ({probe.name})")
    assert "system RAM" in probe.why and probe.limits
    assert detect_probe(gpu=False).why == "The model runs on the CPU, so system RAM is shown."


def test_nvml_probe_on_a_real_driver():
    try:
        probe = NvmlProbe()
    except NvmlUnavailableError as error:
        pytest.skip(f"no NVIDIA driver here: {error}")
    try:
        sample = probe.sample(os.getpid())
        assert 0 < sample.device_used <= sample.device_total
        assert sample.process_used is None or sample.process_used >= 0
        assert probe.device
    finally:
        probe.close()


def test_psutil_probe_sees_this_process_grow():
    probe = PsutilProbe()
    before = probe.sample(os.getpid())
    assert before.process_used and before.process_used > 0
    assert 0 < before.device_used < before.device_total
    block = bytearray(b"\x01") * 100_000_000  # written, so the pages are resident
    after = probe.sample(os.getpid())
    assert after.process_used - before.process_used > 90_000_000
    assert after.time >= before.time
    del block


def test_psutil_probe_for_a_gone_process():
    assert PsutilProbe().sample(2**22 + 12345).process_used is None
