"""The Vulkan-on-lavapipe record in docs/: the page is what the JSON renders to, and the JSON says
what the page claims (every K/V pair ran on Vulkan0 with Flash Attention on and no warning)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORD = json.loads((ROOT / "docs" / "vulkan-lavapipe.json").read_text())


def _script():
    spec = importlib.util.spec_from_file_location(
        "vulkan_lavapipe", ROOT / "scripts" / "vulkan_lavapipe.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_rendered_from_the_record():
    page = (ROOT / "docs" / "vulkan-lavapipe.md").read_text()
    assert _script().render(RECORD) == page


def test_every_pair_ran_on_the_vulkan_device_with_flash_attention():
    pairs = {p["kv"]: p for p in RECORD["pairs"]}
    assert set(pairs) == {"f16/f16", "q8_0/f16", "q8_0/q8_0"}
    for kv, run in pairs.items():
        assert run["runs"] and run["error"] is None, kv
        assert run["flash_attention"] == "on" and run["flash_attention_devices"] == ["Vulkan0"], kv
        assert run["kv_cache_buffers"] == ["Vulkan0"] and run["warnings"] == [], kv
        assert run["k_type"] == [kv.split("/")[0]] and run["v_type"] == [kv.split("/")[1]], kv
