"""Messages between the GUI (or CLI) and the engine process.

Small frozen dataclasses of plain values, pickled over a multiprocessing pipe.
Commands go in (Load, Generate, Unload, Evaluate, Shutdown); events come out
(Loaded, KvCacheInfo, ComputeBufferInfo, KernelWarning, ContextTrimmed, PromptStarted,
Token, Finished, Evaluated, Failed).
Cancellation is not a message: it is a shared byte (app.engine.cancel) that llama.cpp's
abort callback reads inside a token's or a prompt batch's decode on the CPU backend, so it
works while the engine is busy generating.

Times named `at` are the engine's `time.monotonic()` when the thing happened. That clock is
one for the whole machine (CLOCK_MONOTONIC on Linux, QueryPerformanceCounter on Windows,
mach_absolute_time on macOS), so the GUI places them on its own time axis (memory samples
are stamped with the same clock) however late the event is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from app.engine.tool_messages import ToolCall, ToolSpec
from app.kv.split_device import SplitDevice
from app.load.profile import LoadProfile

# ---- commands (in) -------------------------------------------------------------------


@dataclass(frozen=True)
class Load:
    options: LoadProfile


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant" | "tool" (a function's result)
    content: str
    tool_calls: tuple[ToolCall, ...] = ()  # an assistant turn's calls (app.engine.tool_messages)
    tool_call_id: str = ""  # a tool turn: the call it answers


@dataclass(frozen=True)
class SamplingSettings:
    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    seed: int | None = None
    grammar: str = ""  # GBNF the reply must follow (response_format), "" for none
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, added to its logit)
    # Each generated token's log-probability and this many alternatives (0..20); None: off.
    logprobs: int | None = None


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token's log-probability (log-softmax of the logits it was sampled from,
    logit_bias applied, before temperature) and the `top` most likely tokens at that step."""

    token: str
    logprob: float
    data: bytes  # the token's bytes (a token may hold part of a UTF-8 character)
    top: tuple[tuple[str, float, bytes], ...] = ()


@dataclass(frozen=True)
class Generate:
    """Generate a reply. Give `messages` for chat (rendered with the model's chat
    template) or `prompt` for a raw completion."""

    request_id: str
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    messages: tuple[ChatMessage, ...] = ()
    prompt: str | None = None
    tools: tuple[ToolSpec, ...] = ()  # functions offered to the model (chat only)
    # The last message is the beginning of the assistant's reply (one cut at its token limit):
    # the reply goes on from its last word instead of a new turn starting after it.
    continue_reply: bool = False
    # A base model's chat: `messages` as the question-and-answer transcript it continues
    # (app/chats/base_model_frame.py, plain text, no chat template), the oldest turns left out
    # as a chat template's are when the conversation is longer than the context.
    framed: bool = False


@dataclass(frozen=True)
class Evaluate:
    """Score `text` for perplexity in chunks of `chunk_tokens` (second half of each
    chunk scored). When `logprobs_path` is set, the engine writes the scored positions'
    log-probabilities there (reference run) or reads them to compute KL divergence and
    top-1 agreement against the reference (compared run)."""

    request_id: str
    text: str
    chunk_tokens: int = 512
    n_chunks: int = 4
    logprobs_path: str | None = None
    write_reference: bool = False


@dataclass(frozen=True)
class Bench:
    """Measure speed at a context depth, as llama-bench does: fill the context with
    `depth` tokens (untimed), then time one prompt batch of `n_prompt` tokens and
    `n_gen` single-token decodes. Handled by app/engine/bench.py."""

    request_id: str
    depth: int = 0
    n_prompt: int = 512
    n_gen: int = 128
    seed: int = 1234
    repetitions: int = 3  # the median repetition is reported


@dataclass(frozen=True)
class Unload:
    pass


@dataclass(frozen=True)
class Shutdown:
    pass


# ---- events (out) --------------------------------------------------------------------


@dataclass(frozen=True)
class KvCacheInfo:
    """One `llama_kv_cache: size = ...` line of llama.cpp's log (one per cache;
    Gemma 3 has a sliding-window cache and a global one)."""

    total_bytes: int
    cells: int
    layers: int
    seqs: int
    k_type: str
    k_bytes: int
    v_type: str
    v_bytes: int
    swa: bool = False  # the sliding-window cache (logged by llama_kv_cache_iswa)
    # The MiB figures exactly as llama.cpp printed them ("%7.2f" of a C float): the byte
    # fields above are round(MiB * 1048576), so exact-byte checks compare these instead.
    total_mib: float = 0.0
    k_mib: float = 0.0
    v_mib: float = 0.0
    line: str = ""  # the raw log line
    devices: tuple[str, ...] = ()  # buffer names from the "KV buffer size" lines before it
    # Each of those devices' share in MiB as printed ("RPC0[127.0.0.1:50052] KV buffer size =
    # 0.38 MiB"): a model split across workers holds each layer's rows where the layer runs.
    device_mib: tuple[float, ...] = ()


@dataclass(frozen=True)
class ComputeBufferInfo:
    device: str  # "CPU", "CUDA0", "ROCm0", ...
    bytes: int
    mib: float = 0.0  # as printed (2 decimals); bytes = round(mib * 1048576)


KernelWarningKind = Literal[
    "pair_not_compiled",  # the K/V type pair has no compiled Flash Attention kernel (CUDA/HIP)
    "converted_to_f16",  # K and V are converted to f16 before attention
    "fa_disabled",  # Flash Attention is off, so no quantized-K attention kernel runs
    "attention_on_cpu",  # attention (or the layers holding it) runs on the CPU, not the GPU
]
KERNEL_WARNING_KINDS: tuple[KernelWarningKind, ...] = get_args(KernelWarningKind)


@dataclass(frozen=True)
class KernelWarning:
    """llama.cpp said that the int8-K Flash Attention kernel is not what runs. Only such
    warnings; notices about the conversation are other events (ContextTrimmed)."""

    kind: KernelWarningKind
    text: str  # llama.cpp's log line, or a summary of several


@dataclass(frozen=True)
class ContextTrimmed:
    """The conversation did not fit the context: its `dropped_messages` oldest messages
    (never a system message, never the last one) were left out of this reply's prompt."""

    request_id: str
    dropped_messages: int
    n_ctx: int
    prompt_tokens: int  # what is left, as evaluated


@dataclass(frozen=True)
class PromptStarted:
    """The engine starts evaluating the prompt of `request_id` (sent before its tokens)."""

    request_id: str
    prompt_tokens: int
    at: float  # engine time.monotonic()


@dataclass(frozen=True)
class Loaded:
    model_path: str
    options: LoadProfile  # what it was asked to load with
    load_seconds: float
    n_ctx: int  # the context llama.cpp actually created
    n_ctx_train: int
    architecture: str
    chat_format: str  # template source: "gguf", or the architecture fallback name
    kv_caches: tuple[KvCacheInfo, ...]
    compute_buffers: tuple[ComputeBufferInfo, ...]
    warnings: tuple[KernelWarning, ...]
    system_info: str
    at: float  # engine time.monotonic() when the model was ready
    chat_template_notice: str = ""  # why the GGUF's own chat template is not used, if not
    # Why it looks like a base model that continues text rather than answering
    # (app.models.model_kind); '' for a chat model.
    base_model: str = ""
    # A load split across RPC workers: each device's memory as llama.cpp reads it right after
    # the load (this machine's CPU first, then the devices in split order; a worker's over its
    # RPC connection). Empty for a load on this machine alone.
    device_memory: tuple[SplitDevice, ...] = ()
    # The Flash Attention GPU kernels of the libraries that loaded it (kernel_of_folder):
    # "kvstudio-fa.5", "upstream", or "" for a build without CUDA/HIP kernels.
    fa_kernel: str = ""
    # The switches of app.engine.llama_switches set in the engine's environment: (name, value).
    switches: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TemplateFallback:
    """The GGUF's chat template broke a limit on this conversation: this reply and the
    ones after it use the plain template `chat_format` (no request_id: it is about the model)."""

    chat_format: str
    notice: str


@dataclass(frozen=True)
class Token:
    request_id: str
    text: str
    n_past: int  # tokens now in the context (prompt + generated so far)
    at: float  # engine time.monotonic() when this piece was sampled
    logprobs: tuple[TokenLogprob, ...] = ()  # the tokens of this piece, when asked for


@dataclass(frozen=True)
class Finished:
    request_id: str
    text: str
    prompt_tokens: int
    generated_tokens: int
    time_to_first_token_s: float
    tokens_per_second: float  # decode speed, first token excluded
    stop_reason: str  # "stop" | "length" | "cancelled"
    n_past: int
    at: float  # engine time.monotonic() when the reply ended
    logprobs: tuple[TokenLogprob, ...] = ()  # every token of the reply's text, when asked for
    stop_string: str = ""  # the stop string that ended it (stop_reason "stop"), if one did


@dataclass(frozen=True)
class Evaluated:
    request_id: str
    perplexity: float
    scored_tokens: int
    mean_kl_divergence: float | None  # None on the reference run
    top1_agreement: float | None


@dataclass(frozen=True)
class BenchDone:
    """Speeds measured by a Bench command (tokens per second, synchronized timings)."""

    request_id: str
    depth: int
    n_prompt: int
    n_gen: int
    fill_seconds: float
    prompt_seconds: float
    decode_seconds: float
    prompt_tokens_per_second: float
    decode_tokens_per_second: float
    repetitions: int = 1
    prompt_total_seconds: float = 0.0  # all repetitions (prompt_seconds is the median one)
    decode_total_seconds: float = 0.0
    decode_seconds_each: tuple[float, ...] = ()  # each repetition: how much the runs varied


@dataclass(frozen=True)
class Failed:
    message: str  # one sentence for the user
    request_id: str | None = None
    detail: str = ""  # traceback or stderr tail, for the log
    # A failed load only: the model loaded now, the one loaded before it (kept, when llama.cpp
    # refused the new file before the old one was dropped; or loaded again: `reloaded`).
    kept: Loaded | None = None
    reloaded: bool = False
    # What kind of failure, for a client to act on: "context_length_exceeded", or "".
    code: str = ""
