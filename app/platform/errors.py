"""The AppError family: every error a user can see carries one clear sentence.

Each class also inherits the matching stdlib error where one exists, so callers that
only know `FileNotFoundError` or `ValueError` still catch it (as huggingface_hub does).
"""

from __future__ import annotations


class AppError(Exception):
    """An error with a user-facing message (str(error) is the sentence to show)."""


class BadInputError(AppError, ValueError):
    """The user asked for something that cannot work (CLI: exit code 2)."""


class ModelFileMissingError(BadInputError, FileNotFoundError):
    """The model path does not exist."""


class InvalidGgufError(BadInputError):
    """The file is not a GGUF model llama.cpp can be given: its header is malformed, hostile
    or inconsistent (app.models.gguf_validate). One line, never a traceback.

    `kind`: which class of check refused it ('magic', 'version', 'truncated', 'count',
    'length', 'key', 'value-type', 'value-range', 'tensor', 'offset', 'layout', ...), for logs
    and the tests' tallies; the message is what a user reads.
    """

    default_kind = "invalid"

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind or self.default_kind


class NotAGgufError(InvalidGgufError):
    """The file is not a GGUF model (wrong magic or unsupported version)."""

    default_kind = "magic"


class TruncatedGgufError(InvalidGgufError):
    """The GGUF file ends before its header, tensor data or declared size."""

    default_kind = "truncated"


class UnknownKvTypeError(BadInputError):
    """A K or V cache type that llama.cpp does not support."""


class ContextTooLargeError(BadInputError):
    """The context asked for cannot be loaded as it stands: more than llama.cpp holds, beyond
    the model's trained context, or more memory than is free (app.load.load_check).

    `forceable`: the user may load anyway (CLI --force, GUI "Load anyway"); llama.cpp's own
    uint32 limit is not. `n_ctx`: the context asked for, in tokens.
    """

    def __init__(self, message: str, *, n_ctx: int, forceable: bool) -> None:
        super().__init__(message)
        self.n_ctx = n_ctx
        self.forceable = forceable


class NotEnoughMemoryError(ContextTooLargeError, MemoryError):
    """The load needs more memory than the device reports free (weights, KV cache, buffers)."""

    def __init__(
        self,
        message: str,
        *,
        n_ctx: int,
        need_bytes: int,
        kv_bytes: int,
        free_bytes: int,
        largest_n_ctx: int,
    ) -> None:
        super().__init__(message, n_ctx=n_ctx, forceable=True)
        self.need_bytes = need_bytes
        self.kv_bytes = kv_bytes
        self.free_bytes = free_bytes
        self.largest_n_ctx = largest_n_ctx


class EngineCrashedError(AppError):
    """The engine process died; the message carries the tail of its stderr."""


class EngineFailedError(AppError):
    """The engine reported a failure (load failed, generation failed)."""


class ContextLengthExceededError(EngineFailedError):
    """The prompt leaves no room in the context, even with its oldest turns dropped; the
    server answers it with a 400 under OpenAI's code (Failed.code)."""

    code = "context_length_exceeded"


class DownloadError(AppError):
    """A download could not finish; the partial file is kept when it is resumable."""


class ChecksumMismatchError(DownloadError):
    """The downloaded file's SHA-256 does not match what the Hub reports."""


class GatedRepoError(DownloadError, PermissionError):
    """The repository needs a token, or the token has no access."""


class UnsafePathError(DownloadError):
    """A file name from the Hub would write outside the target folder."""


class DiskFullError(DownloadError, OSError):
    """Not enough free disk space for the download."""


class HubUnreachableError(DownloadError, ConnectionError):
    """The Hub (or the HF_ENDPOINT mirror) could not be reached, or offline mode is on."""


class ModelNotFoundError(BadInputError, LookupError):
    """No such repository, file, quantization or library model."""
