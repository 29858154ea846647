"""The server's handle on the embedder process (app.engine.embedder): started at the first
/v1/embeddings request for the loaded model's file, started again for another file, stopped
with the server. One request at a time (a lock); a call blocks, so the route runs it on a
worker thread. A model llama.cpp cannot embed with (the process died on it) is remembered,
and later requests for it are refused at once instead of crashing it again."""

from __future__ import annotations

import logging
import multiprocessing
import threading
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from app.engine.embedder import Embeddings, EmbedRefused, EmbedRequest, embedder_main

log = logging.getLogger(__name__)

LOAD_TIMEOUT_S = 300.0
EMBED_TIMEOUT_S = 300.0


class EmbedderFailed(Exception):
    """The embedder could not answer; the message is one sentence for the client."""


class Embedder:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: BaseProcess | None = None
        self._connection: Connection[object, object] | None = None
        self._model_path = ""
        self._cannot_embed: dict[str, str] = {}  # model file -> why

    def embed(
        self, model_path: str, model_name: str, request: EmbedRequest
    ) -> Embeddings | EmbedRefused:
        """Embed with `model_path`'s model (loading it first if needed). Raises
        EmbedderFailed when the process cannot answer."""
        with self._lock:
            known = self._cannot_embed.get(model_path)
            if known:
                raise EmbedderFailed(known)
            try:
                connection = self._ready(model_path)
                connection.send(request)
                answer = self._answer(connection, EMBED_TIMEOUT_S)
                if not isinstance(answer, (Embeddings, EmbedRefused)):
                    raise EmbedderFailed("the embedder answered something else")
                return answer
            except (EOFError, OSError, EmbedderFailed) as error:
                self._stop()
                why = (
                    f"llama.cpp could not compute embeddings with {model_name}: the embedder "
                    "process stopped on it, so this server does not serve embeddings for this "
                    "model (chat and completions are not affected)."
                )
                log.warning("embedder failed on %s: %s", model_path, error)
                self._cannot_embed[model_path] = why
                raise EmbedderFailed(why) from None

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _ready(self, model_path: str) -> Connection[object, object]:
        if self._connection is not None and self._model_path == model_path:
            if self._process is not None and self._process.is_alive():
                return self._connection
        self._stop()
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        process = context.Process(
            target=embedder_main, args=(theirs, model_path), name="kvstudio-embedder", daemon=True
        )
        process.start()
        theirs.close()
        self._process, self._connection, self._model_path = process, ours, model_path
        if self._answer(ours, LOAD_TIMEOUT_S) != "ready":
            raise EmbedderFailed("the embedder did not start")
        return ours

    def _answer(self, connection: Connection[object, object], timeout: float) -> object:
        if not connection.poll(timeout):
            raise EmbedderFailed(f"no answer in {timeout:.0f} s")
        return connection.recv()

    def _stop(self) -> None:
        connection, process = self._connection, self._process
        self._connection = self._process = None
        if connection is not None:
            connection.close()  # the embedder reads EOF and returns
        if process is not None:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join(5)
