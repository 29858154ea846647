"""One request's line in the request log, written once: refused, failed or finished."""

from __future__ import annotations

from typing import TypedDict

from starlette.requests import Request

from app.engine.messages import Finished
from app.server.openai_request import ApiError
from app.server.request_log import RequestLog, RequestRecord


class _RecordHead(TypedDict):
    """The fields every RequestRecord of a request starts with."""

    request_id: str
    at: float
    client: str
    method: str
    path: str


class RequestRecorder:
    """The request's line in the request log, written once."""

    def __init__(self, request: Request, request_id: str, arrived: float, log: RequestLog):
        self.request_id, self.arrived, self.log = request_id, arrived, log
        self.client = request.client.host if request.client else ""
        self.method, self.path = request.method, request.url.path
        self.prompt = ""
        self.done = False

    def refused(self, error: ApiError) -> None:
        self._add(RequestRecord(**self._head(), status=error.status, error=error.message))

    def finished(self, finished: Finished, disconnected_at: float = 0.0) -> None:
        reason = "cancelled" if disconnected_at else finished.stop_reason
        self._add(
            RequestRecord(
                **self._head(),
                status=200,
                prompt_tokens=finished.prompt_tokens,
                completion_tokens=finished.generated_tokens,
                tokens_per_second=finished.tokens_per_second,
                time_to_first_token_s=finished.time_to_first_token_s,
                finish_reason=reason,
                ended_at=finished.at,
                prompt=self.prompt,
            )
        )

    def _head(self) -> _RecordHead:
        return {
            "request_id": self.request_id,
            "at": self.arrived,
            "client": self.client,
            "method": self.method,
            "path": self.path,
        }

    def _add(self, record: RequestRecord) -> None:
        if not self.done:
            self.done = True
            self.log.add(record)
