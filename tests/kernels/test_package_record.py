"""The backend packages recorded in docs/: each record is a valid manifest, a GPU package's counts
show the int8 dot instruction in every q8_0-K pair and none in the f16 control, a reduced build says
so, and docs/backends.md's table is exactly what the records render to."""

from __future__ import annotations

from app.backends.manifest import BackendManifest
from kernels.package import gpu_targets
from kernels.package_record import PAGE, RECORD_DIR, recorded, render_page, render_table
from kernels.variants import VARIANTS


def test_the_page_table_is_generated_from_the_records():
    text = PAGE.read_text()
    assert render_page(text, render_table(recorded())) == text


def _full_targets(manifest: BackendManifest) -> tuple[str, ...]:
    variant = VARIANTS.get(manifest.name)
    return gpu_targets(variant.cmake_args) if variant else ()


def test_recorded_gpu_packages_carry_int8_k_and_say_when_reduced():
    for manifest, archive in recorded():
        assert archive["name"].startswith(f"kvstudio-backend-{manifest.name}-")
        if not manifest.fa_pairs:  # CPU, Vulkan: every pair, no GPU kernel list
            continue
        assert "q8_0-f16" in manifest.fa_pairs
        # AMD targets are named alike in both; CUDA architectures "90" are counted as "sm_90".
        named = {t if t.startswith("gfx") else f"sm_{t}" for t in manifest.gpu_targets}
        assert set(manifest.instruction_counts) == named
        for target, per in manifest.instruction_counts.items():
            assert per["q8_0-f16"] > 0 and per["q8_0-q8_0"] > 0, target
            assert per["f16-f16"] == 0, target
        full = _full_targets(manifest)
        if full and set(manifest.gpu_targets) < set(full):
            assert "reduced" in manifest.build.get("note", ""), manifest.name


def test_records_live_in_docs():
    assert RECORD_DIR.is_dir()
