"""A stand-in for the engine process, for UI tests that only need the engine's messages.

EngineClient(process_factory=FakeEngine) talks to it exactly as to EngineProcess (start,
send, recv, cancel, stop): a Load is answered with Loaded, a Generate with PromptStarted,
one Token per word of `reply` and Finished, as the real engine orders them. No process and
no llama.cpp, so such a test takes milliseconds; what it sees is recorded in `sent`. Tests
where llama.cpp itself is the point (loading a real file, the KV cache it allocates, a
crash) keep the real EngineProcess.
"""

from __future__ import annotations

import queue
import time

from app.engine.messages import (
    Finished,
    Generate,
    KvCacheInfo,
    Load,
    Loaded,
    PromptStarted,
    Shutdown,
    Token,
)


class FakeEngine:
    pid = 0

    def __init__(self, reply: str = "Hello from the fake engine.") -> None:
        self.reply = reply
        self.sent: list[object] = []  # every command, in order
        self._events: queue.Queue[object] = queue.Queue()
        self._alive = False

    def start(self) -> None:
        self._alive = True

    def is_alive(self) -> bool:
        return self._alive

    def stop(self, timeout: float = 0.0) -> None:
        self._alive = False

    kill = stop

    def cancel(self) -> None:
        pass  # every reply is already complete when it is sent

    def stderr_tail(self, lines: int = 0) -> str:
        return ""

    def send(self, command: object) -> None:
        self.sent.append(command)
        if isinstance(command, Load):
            self._events.put(self._loaded(command))
        elif isinstance(command, Generate):
            self._reply(command)
        elif isinstance(command, Shutdown):
            self._alive = False

    def recv(self, timeout: float | None = None) -> object | None:
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def _loaded(self, load: Load) -> Loaded:
        o = load.options
        cells = o.n_ctx
        k_bytes, v_bytes = cells * 1024, cells * 2048
        kv = KvCacheInfo(
            total_bytes=k_bytes + v_bytes,
            cells=cells,
            layers=4,
            seqs=1,
            k_type=o.kv.k.name,
            k_bytes=k_bytes,
            v_type=o.kv.v.name,
            v_bytes=v_bytes,
            total_mib=(k_bytes + v_bytes) / 2**20,
            k_mib=k_bytes / 2**20,
            v_mib=v_bytes / 2**20,
            devices=("CPU",),
        )
        return Loaded(
            model_path=o.model_path,
            options=o,
            load_seconds=0.01,
            n_ctx=cells,
            n_ctx_train=cells,
            architecture="llama",
            chat_format="gguf",
            kv_caches=(kv,),
            compute_buffers=(),
            warnings=(),
            system_info="fake engine",
            at=time.monotonic(),
        )

    def _reply(self, command: Generate) -> None:
        words = self.reply.split(" ")
        pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
        self._events.put(PromptStarted(command.request_id, 8, time.monotonic()))
        for i, piece in enumerate(pieces):
            self._events.put(Token(command.request_id, piece, 9 + i, time.monotonic()))
        self._events.put(
            Finished(
                command.request_id,
                self.reply,
                prompt_tokens=8,
                generated_tokens=len(pieces),
                time_to_first_token_s=0.001,
                tokens_per_second=1000.0,
                stop_reason="stop",
                n_past=8 + len(pieces),
                at=time.monotonic(),
            )
        )
