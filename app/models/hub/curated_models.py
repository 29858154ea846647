"""Small instruct (chat) models to start with: Discover's "Recommended" list.

Kept in the project, not fetched, so a new user sees names, sizes, licences and a fit verdict
for this machine before the app asks the Hub anything (the Hub is asked only when the user
opens one). Each entry names one file (Q4_K_M: the usual balance of size and quality) with its
size as the Hub lists it, and the shape its GGUF header states (layers, heads, head size,
trained context), which is all the fit arithmetic reads besides the file's size, so the
verdicts come from the same code as the repo view's (app.kv.fit.estimate_fit).

    for model in CURATED_MODELS:
        header = model.header()        # a GgufHeader with the shape's keys and no tensors
"""

from __future__ import annotations

from dataclasses import dataclass

from app.models.gguf_header import GgufHeader

# Q4_K_M of llama.cpp's LlamaFileType, for the header's general.file_type.
_Q4_K_M = 15


@dataclass(frozen=True)
class ModelShape:
    """What a GGUF header says about the model's size in memory (the fit's inputs)."""

    architecture: str  # general.architecture
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_ctx_train: int
    n_vocab: int
    sliding_window: int = 0  # 0: every layer attends to the whole context


@dataclass(frozen=True)
class CuratedModel:
    """One recommended model: a Hub repo and the file in it a newcomer should take."""

    repo_id: str
    name: str  # as a user calls it, short: the list is of chat (instruct) models
    parameters: str  # "1.5B"
    file: str  # the recommended file in the repo
    quantization: str
    size_bytes: int  # the file's size as the Hub lists it
    licence: str  # short, as a column shows it: "Apache-2.0", "Llama 3.2"
    licence_name: str  # in full: "Llama 3.2 Community License"
    maker: str
    shape: ModelShape

    def header(self) -> GgufHeader:
        """A header with the keys the fit arithmetic reads, as the model's GGUF states them
        (no tensors: the weights are the file's size)."""
        s, arch = self.shape, self.shape.architecture
        metadata: dict[str, object] = {
            "general.architecture": arch,
            "general.name": self.name,
            "general.file_type": _Q4_K_M,
            f"{arch}.block_count": s.n_layer,
            f"{arch}.embedding_length": s.n_embd,
            f"{arch}.feed_forward_length": s.n_ff,
            f"{arch}.context_length": s.n_ctx_train,
            f"{arch}.attention.head_count": s.n_head,
            f"{arch}.attention.head_count_kv": s.n_head_kv,
            f"{arch}.attention.key_length": s.head_dim,
            f"{arch}.attention.value_length": s.head_dim,
            f"{arch}.vocab_size": s.n_vocab,
        }
        if s.sliding_window:
            metadata[f"{arch}.attention.sliding_window"] = s.sliding_window
        return GgufHeader(
            version=3, metadata=metadata, tensors=(), alignment=32, data_offset=0, header_bytes=0
        )


# Smallest first. Shapes from each model's config.json (as llama.cpp's converter writes them
# into the GGUF); sizes of the Q4_K_M files as the Hub lists them.
CURATED_MODELS: tuple[CuratedModel, ...] = (
    CuratedModel(
        "Qwen/Qwen2.5-0.5B-Instruct-GGUF",
        "Qwen2.5 0.5B",
        "0.5B",
        "qwen2.5-0.5b-instruct-q4_k_m.gguf",
        "Q4_K_M",
        491_400_032,
        "Apache-2.0",
        "Apache License 2.0",
        "Alibaba Qwen",
        ModelShape("qwen2", 24, 896, 14, 2, 64, 4864, 32768, 151936),
    ),
    CuratedModel(
        "unsloth/gemma-3-1b-it-GGUF",
        "Gemma 3 1B",
        "1B",
        "gemma-3-1b-it-Q4_K_M.gguf",
        "Q4_K_M",
        806_058_112,
        "Gemma",
        "Gemma Terms of Use",
        "Google",
        ModelShape("gemma3", 26, 1152, 4, 1, 256, 6912, 32768, 262144, sliding_window=512),
    ),
    CuratedModel(
        "bartowski/Llama-3.2-1B-Instruct-GGUF",
        "Llama 3.2 1B",
        "1B",
        "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
        "Q4_K_M",
        807_694_464,
        "Llama 3.2",
        "Llama 3.2 Community License",
        "Meta",
        ModelShape("llama", 16, 2048, 32, 8, 64, 8192, 131072, 128256),
    ),
    CuratedModel(
        "HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF",
        "SmolLM2 1.7B",
        "1.7B",
        "smollm2-1.7b-instruct-q4_k_m.gguf",
        "Q4_K_M",
        1_055_609_568,
        "Apache-2.0",
        "Apache License 2.0",
        "Hugging Face",
        ModelShape("llama", 24, 2048, 32, 32, 64, 8192, 8192, 49152),
    ),
    CuratedModel(
        "Qwen/Qwen2.5-1.5B-Instruct-GGUF",
        "Qwen2.5 1.5B",
        "1.5B",
        "qwen2.5-1.5b-instruct-q4_k_m.gguf",
        "Q4_K_M",
        1_117_320_480,
        "Apache-2.0",
        "Apache License 2.0",
        "Alibaba Qwen",
        ModelShape("qwen2", 28, 1536, 12, 2, 128, 8960, 32768, 151936),
    ),
    CuratedModel(
        "bartowski/Llama-3.2-3B-Instruct-GGUF",
        "Llama 3.2 3B",
        "3B",
        "Llama-3.2-3B-Instruct-Q4_K_M.gguf",
        "Q4_K_M",
        2_019_377_696,
        "Llama 3.2",
        "Llama 3.2 Community License",
        "Meta",
        ModelShape("llama", 28, 3072, 24, 8, 128, 8192, 131072, 128256),
    ),
    CuratedModel(
        "bartowski/Phi-3.5-mini-instruct-GGUF",
        "Phi-3.5 mini",
        "3.8B",
        "Phi-3.5-mini-instruct-Q4_K_M.gguf",
        "Q4_K_M",
        2_393_232_672,
        "MIT",
        "MIT License",
        "Microsoft",
        ModelShape("phi3", 32, 3072, 32, 32, 96, 8192, 131072, 32064),
    ),
)


def curated_model(repo_id: str) -> CuratedModel | None:
    """The recommended entry for `repo_id`, if it is one."""
    return next((m for m in CURATED_MODELS if m.repo_id == repo_id), None)
