"""The JSON shapes this package reads and writes, as TypedDicts: a search result from the
Hub's API, and a GGUF entry as GgufEntry.to_json writes it (the download queue's file).

What arrives is not checked against them when it is read: the readers (client._summary,
GgufEntry.from_json) still check what they use, as an answer may differ from its shape."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class HubModelJson(TypedDict, total=False):
    """One model in /api/models, with the fields client._SEARCH_EXPAND asks for."""

    id: str
    modelId: str  # what older Hub answers call the id
    author: str
    downloads: int
    likes: int
    lastModified: str  # ISO 8601, "2026-11-03T10:00:00.000Z"
    gated: bool | str  # False, "auto" or "manual"
    private: bool
    tags: list[str]
    pipeline_tag: str


class RemoteFileJson(TypedDict):
    path: str
    size: int
    sha256: str | None


class GgufEntryJson(TypedDict):
    repo_id: str
    name: str
    quantization: NotRequired[str | None]
    files: list[RemoteFileJson]
