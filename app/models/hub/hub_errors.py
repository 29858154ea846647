"""Turn huggingface_hub / httpx2 exceptions into the app's one-sentence errors."""

from __future__ import annotations

import httpx2
from huggingface_hub import errors as hf_errors

from app.models.hub.api_get import unreachable_message
from app.models.hub_env import hub_endpoint
from app.platform.errors import (
    AppError,
    GatedRepoError,
    HubUnreachableError,
    ModelNotFoundError,
)

_NETWORK_ERRORS = (httpx2.TransportError, httpx2.TimeoutException, ConnectionError)


def status_of(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)


def gated_message(repo_id: str, status: int | None) -> str:
    if status == 403:
        return (
            f"Your Hugging Face token has no access to '{repo_id}': accept the model's terms "
            f"on its Hub page, or use a token with read access."
        )
    # The app's place for the token is the Models page's "Hugging Face token…" button (the
    # banner that shows this sentence has its own "Add token…"); the CLI reads HF_TOKEN.
    return (
        f"'{repo_id}' is gated or private: add a Hugging Face access token (Models page, "
        f"Hugging Face token…; or HF_TOKEN) to download it."
    )


def translate(error: BaseException, repo_id: str, filename: str | None = None) -> AppError:
    """The AppError a user should see for `error` (raised while talking to the Hub)."""
    if isinstance(error, AppError):
        return error
    status = status_of(error)
    if isinstance(error, hf_errors.OfflineModeIsEnabled):
        return HubUnreachableError(
            "Offline mode is on (HF_HUB_OFFLINE): the Hub cannot be reached; "
            "only models already on disk can be used."
        )
    if (
        isinstance(error, hf_errors.GatedRepoError)
        or status in (401, 403)
        and not isinstance(error, hf_errors.RepositoryNotFoundError)
    ):
        return GatedRepoError(gated_message(repo_id, status))
    if isinstance(error, hf_errors.RevisionNotFoundError):
        return ModelNotFoundError(f"'{repo_id}' has no such revision on the Hub.")
    if isinstance(error, hf_errors.RemoteEntryNotFoundError) or (
        status == 404 and filename and not isinstance(error, hf_errors.RepositoryNotFoundError)
    ):
        return ModelNotFoundError(f"'{repo_id}' has no file named '{filename}'.")
    if isinstance(error, hf_errors.RepositoryNotFoundError):
        return ModelNotFoundError(
            f"No model repository '{repo_id}' was found on the Hub "
            f"(if it is private or gated, add a Hugging Face token)."
        )
    if status is not None and status >= 500:
        return HubUnreachableError(
            f"The Hub ({hub_endpoint()}) answered with server error {status}; try again later."
        )
    if isinstance(error, hf_errors.HfHubHTTPError) and status is not None:
        return HubUnreachableError(f"The Hub refused the request for '{repo_id}' (HTTP {status}).")
    if isinstance(error, _NETWORK_ERRORS):
        return HubUnreachableError(unreachable_message(error))
    return HubUnreachableError(f"Talking to the Hub about '{repo_id}' failed: {error}")
