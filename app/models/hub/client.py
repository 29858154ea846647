"""Find GGUF models on the Hub: search, list a repo's GGUF files grouped by quantization.

The Hub's JSON API through huggingface_hub's session and headers, with the endpoint read at
call time, so HF_ENDPOINT (a mirror, or the test server) and HF_TOKEN behave as everywhere
else; each request has a deadline (api_get.py says why not HfApi's own calls).
No file is downloaded here: sizes and LFS sha256 come from the repo tree.

    results = search_models("gemma", sort="downloads")        # list[RepoSummary]
    repo = list_gguf_files("unsloth/gemma-3-1b-it-GGUF")      # RepoFiles
    repo.by_quantization()["Q4_K_M"]                          # list[GgufEntry]
    entry = repo.pick("Q4_K_M")                               # or a file name
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Literal, cast
from urllib.parse import quote

from huggingface_hub.utils import build_hf_headers

from app.models.gguf_names import parse_quantization, split_info
from app.models.hub.api_get import get_json_list
from app.models.hub.hub_errors import translate
from app.models.hub.hub_json import GgufEntryJson, HubModelJson
from app.models.hub.tokens import load_token
from app.models.hub_env import hub_endpoint, is_offline
from app.platform.errors import BadInputError, HubUnreachableError, ModelNotFoundError

log = logging.getLogger(__name__)

SortKey = Literal["downloads", "likes", "last_modified"]
SORT_KEYS: tuple[SortKey, ...] = ("downloads", "likes", "last_modified")

_PROJECTOR_RE = re.compile(r"(^|[/_-])mmproj", re.IGNORECASE)
# A repo name that says it is tuned to follow instructions: "...-Instruct", "...-Chat", and
# Gemma's "-it" (a whole token, so "-italian" is not one).
_CHAT_NAME_RE = re.compile(r"instruct|chat|(?:^|[-_.])it(?:[-_.]|$)", re.IGNORECASE)
_CHAT_TAGS = {"conversational"}  # the Hub's tag for models with a chat template
_CHAT_SEARCH_FACTOR = 4  # chat-only keeps a share of the results: ask for more, keep `limit`
_SEARCH_EXPAND = (
    "author",
    "downloads",
    "likes",
    "lastModified",
    "gated",
    "private",
    "tags",
    "pipeline_tag",
)


@dataclass(frozen=True)
class RepoSummary:
    """One search result."""

    repo_id: str
    author: str | None
    downloads: int | None
    likes: int | None
    last_modified: datetime | None
    gated: bool | str | None = None  # False, "auto" or "manual" as the Hub says
    private: bool | None = None
    tags: tuple[str, ...] = ()
    pipeline_tag: str | None = None  # "text-generation", ... as the Hub says

    @property
    def is_chat_model(self) -> bool:
        """Tuned for chat: the Hub tags it conversational, or its name says instruct/chat/-it."""
        if _CHAT_TAGS & {t.lower() for t in self.tags}:
            return True
        return bool(_CHAT_NAME_RE.search(self.repo_id.rsplit("/", 1)[-1]))


@dataclass(frozen=True)
class RemoteFile:
    """One file in a repo tree (no download): its size and LFS sha256 when it is in LFS."""

    path: str
    size: int
    sha256: str | None


@dataclass(frozen=True)
class GgufEntry:
    """One model a user can pick: a single GGUF file or all parts of a split model.

    A split model (`name-00001-of-0000N.gguf`) is one entry; it is downloaded as a whole
    and loaded by the first part's path (llama.cpp finds the other parts next to it).
    """

    repo_id: str
    name: str  # display name: the file name, or the split set's base name
    quantization: str | None  # 'Q4_K_M', 'IQ4_XS', 'BF16', ... from the file name
    files: tuple[RemoteFile, ...]  # parts in order (one for a single file)

    @property
    def first_file(self) -> str:
        """The path llama.cpp is given (part 1 of a split model)."""
        return self.files[0].path

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def is_split(self) -> bool:
        return len(self.files) > 1

    @property
    def n_parts(self) -> int:
        return len(self.files)

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: GgufEntryJson) -> GgufEntry:
        """The entry to_json wrote; KeyError / TypeError when `data` is not one."""
        files = tuple(RemoteFile(**f) for f in data["files"])
        return cls(data["repo_id"], data["name"], data.get("quantization"), files)


@dataclass(frozen=True)
class RepoFiles:
    """The GGUF entries of one repo at one revision."""

    repo_id: str
    revision: str
    entries: tuple[GgufEntry, ...]
    projectors: tuple[RemoteFile, ...] = field(default=())  # mmproj-*.gguf (vision), not models
    incomplete_splits: tuple[str, ...] = field(default=())  # split sets with missing parts

    def by_quantization(self) -> dict[str, list[GgufEntry]]:
        """Entries grouped by quantization label ('other' when a name carries none)."""
        groups: dict[str, list[GgufEntry]] = {}
        for entry in self.entries:
            groups.setdefault(entry.quantization or "other", []).append(entry)
        return groups

    def pick(self, selector: str | None) -> GgufEntry:
        """The entry for a quantization ('Q4_K_M', any case) or a file path in the repo.

        With no selector: the only entry, else Q4_K_M, else raise. Raises
        ModelNotFoundError (a BadInputError) naming what the repo has.
        """
        if not self.entries:
            raise ModelNotFoundError(f"'{self.repo_id}' has no GGUF files.")
        if not selector:
            if len(self.entries) == 1:
                return self.entries[0]
            selector = "Q4_K_M"
            if not any((e.quantization or "").upper() == selector for e in self.entries):
                raise BadInputError(
                    f"'{self.repo_id}' has {len(self.entries)} GGUF files; pick one with "
                    f"{self.repo_id}:QUANT (one of {', '.join(self.quantizations())})."
                )
        for entry in self.entries:
            if selector in (entry.name, entry.first_file) or any(
                f.path == selector for f in entry.files
            ):
                return entry
        matches = [e for e in self.entries if (e.quantization or "").upper() == selector.upper()]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            names = ", ".join(e.first_file for e in matches)
            raise BadInputError(
                f"'{self.repo_id}' has {len(matches)} {selector.upper()} files ({names}); "
                "name the file."
            )
        raise ModelNotFoundError(
            f"'{self.repo_id}' has no '{selector}' GGUF; it has {', '.join(self.quantizations())}."
        )

    def quantizations(self) -> list[str]:
        return sorted({e.quantization or "other" for e in self.entries})


def group_gguf_files(
    repo_id: str, files: list[RemoteFile]
) -> tuple[list[GgufEntry], list[RemoteFile], list[str]]:
    """(model entries, projector files, incomplete split bases) from a repo's file list."""
    entries: list[GgufEntry] = []
    projectors: list[RemoteFile] = []
    splits: dict[tuple[str, int], dict[int, RemoteFile]] = {}
    for f in files:
        if not f.path.lower().endswith(".gguf"):
            continue
        if _PROJECTOR_RE.search(f.path):
            projectors.append(f)
            continue
        info = split_info(f.path)
        if info is None:
            name = f.path.rsplit("/", 1)[-1]
            entries.append(GgufEntry(repo_id, name, parse_quantization(f.path), (f,)))
            continue
        base, index, count = info
        splits.setdefault((base, count), {})[index] = f
    incomplete = []
    for (base, count), parts in splits.items():
        if sorted(parts) != list(range(1, count + 1)):
            incomplete.append(base)
            log.warning(
                "%s: split model %s has parts %s of %d", repo_id, base, sorted(parts), count
            )
            continue
        ordered = tuple(parts[i] for i in range(1, count + 1))
        entries.append(
            GgufEntry(
                repo_id, base.rsplit("/", 1)[-1], parse_quantization(ordered[0].path), ordered
            )
        )
    entries.sort(key=lambda e: (e.quantization or "~", e.first_file))
    return entries, projectors, incomplete


# ---- Hub calls -----------------------------------------------------------------------------


def _api(token: str | None) -> tuple[str, dict[str, str]]:
    """(the Hub's URL, the request headers with the user's token when there is one)."""
    if is_offline():
        raise HubUnreachableError(
            "Offline mode is on (HF_HUB_OFFLINE): the Hub cannot be searched; "
            "only models already on disk can be used."
        )
    chosen = token if token is not None else load_token() or False
    return hub_endpoint(), build_hf_headers(token=chosen, library_name="kvstudio")


def search_models(
    query: str = "",
    *,
    sort: str = "downloads",
    limit: int = 50,
    token: str | None = None,
    chat_only: bool = False,
) -> list[RepoSummary]:
    """GGUF model repos matching `query`, most downloaded / liked / recently updated first
    (`sort`: one of SORT_KEYS; anything else is BadInputError). `chat_only`: only instruct /
    chat models (RepoSummary.is_chat_model). A Hub that does not answer within
    api_get.API_TIMEOUT_S raises HubUnreachableError saying so."""
    key = next((k for k in SORT_KEYS if k == sort), None)  # what a user picked, as the Hub's key
    if key is None:
        raise BadInputError(f"Sort by one of {', '.join(SORT_KEYS)}, not '{sort}'.")
    endpoint, headers = _api(token)
    params: dict[str, str | int | list[str]] = {
        "filter": ["gguf"],
        "sort": "lastModified" if key == "last_modified" else key,
        # The Hub answers at most `limit` per page; one page is all a search shows.
        "limit": limit * _CHAT_SEARCH_FACTOR if chat_only else limit,
        "expand": list(_SEARCH_EXPAND),
    }
    if query:
        params["search"] = query
    try:
        items = get_json_list(f"{endpoint}/api/models", params, headers, pages=1)
        # The Hub's answer as its API documents it; _summary checks what it reads.
        results = [_summary(cast(HubModelJson, item)) for item in items if isinstance(item, dict)]
    except Exception as error:
        log.debug("search %r failed", query, exc_info=True)
        raise translate(error, query or "(all)") from error
    if chat_only:
        results = [r for r in results if r.is_chat_model]
    log.debug("search %r sort=%s: %d results", query, sort, len(results))
    return results[:limit]


def _summary(item: HubModelJson) -> RepoSummary:
    """One search result from the Hub's JSON (the fields `_SEARCH_EXPAND` asks for)."""
    repo_id = str(item.get("id") or item.get("modelId") or "")
    author = item.get("author") or (repo_id.split("/", 1)[0] if "/" in repo_id else None)
    modified = item.get("lastModified")
    tags = item.get("tags")
    pipeline = item.get("pipeline_tag")
    return RepoSummary(
        repo_id=repo_id,
        author=author,
        downloads=item.get("downloads"),
        likes=item.get("likes"),
        last_modified=_parse_date(modified) if isinstance(modified, str) else None,
        gated=item.get("gated"),
        private=item.get("private"),
        tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
        pipeline_tag=pipeline if isinstance(pipeline, str) else None,
    )


def _parse_date(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def list_repo_files(
    repo_id: str, *, revision: str = "main", token: str | None = None
) -> list[RemoteFile]:
    """Every file of a repo (recursive tree), with size and LFS sha256; no download."""
    endpoint, headers = _api(token)
    url = f"{endpoint}/api/models/{repo_id}/tree/{quote(revision, safe='')}"
    try:
        items = get_json_list(url, {"recursive": True}, headers)
    except Exception as error:
        log.debug("tree of %s failed", repo_id, exc_info=True)
        raise translate(error, repo_id) from error
    files = []
    for item in items:
        if not isinstance(item, dict) or item.get("type") != "file":
            continue  # a folder
        lfs = item.get("lfs") if isinstance(item.get("lfs"), dict) else None
        files.append(
            RemoteFile(
                path=str(item["path"]),
                size=int(lfs["size"] if lfs is not None else item.get("size", 0)),
                sha256=str(lfs["oid"]) if lfs is not None else None,
            )
        )
    return files


def list_gguf_files(repo_id: str, *, revision: str = "main", token: str | None = None) -> RepoFiles:
    """The repo's GGUF models (split sets merged).

    .by_quantization() groups them by quantization.
    """
    entries, projectors, incomplete = group_gguf_files(
        repo_id, list_repo_files(repo_id, revision=revision, token=token)
    )
    return RepoFiles(repo_id, revision, tuple(entries), tuple(projectors), tuple(incomplete))


def parse_model_spec(spec: str) -> tuple[str, str | None]:
    """'owner/name[:QUANT|FILE]' -> ('owner/name', 'QUANT' or 'FILE' or None)."""
    repo_id, _, selector = spec.strip().partition(":")
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(parts) or any(p in (".", "..") for p in parts):
        raise BadInputError(
            f"'{spec}' is not a Hub model: write OWNER/NAME[:QUANT] "
            "(e.g. unsloth/gemma-3-1b-it-GGUF:Q4_K_M)."
        )
    return repo_id, selector or None
