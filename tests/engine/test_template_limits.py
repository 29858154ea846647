"""Chat templates from a GGUF render inside limits: hostile ones (escapes, endless loops,
output and memory bombs, parse errors, recursion) are refused with the reason in words,
quickly and in bounded memory; Stop ends an endless render; real templates still work.

Before this, loops and bombs hung or took gigabytes and only the escapes were refused."""

from __future__ import annotations

import re
import threading
import time
import tracemalloc
from collections import Counter

import pytest

from app.engine.chat_template import choose_template
from app.engine.messages import ChatMessage
from app.engine.template_sandbox import (
    RenderLimits,
    RenderStopped,
    TemplateRefused,
    compile_template,
    render_template,
)
from tests.engine.template_payloads import PAYLOADS, REASONS

AREA = "Templates and text from files"
QUICK = RenderLimits(seconds=0.3)  # the engine's limit is 5 s; the refusal is the same
# The limits each payload renders under: QUICK where the time limit is a right refusal for its
# kind (loops, recursion, memory bombs), the engine's own where it is not (an output bomb must
# be refused for what it makes, also on a busy machine where 0.3 s of wall time can pass
# before it has made much).
ENGINE_LIMITS = RenderLimits()


def limits_for(kind: str) -> RenderLimits:
    return QUICK if re.search(REASONS[kind], "it ran longer than 0.3 s") else ENGINE_LIMITS


CONTEXT = {
    "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
    "bos_token": "<s>",
    "eos_token": "</s>",
    "add_generation_prompt": True,
}
MIB = 1024 * 1024


def _refusal(source: str, limits: RenderLimits = QUICK) -> TemplateRefused:
    with pytest.raises(TemplateRefused) as refused:
        render_template(compile_template(source, limits), CONTEXT, limits)
    return refused.value


@pytest.mark.slow
def test_every_hostile_template_is_refused_quickly_naming_why(reliability):
    assert len(PAYLOADS) >= 35
    refused_by_kind: Counter[str] = Counter()
    worst_seconds = worst_mib = 0.0
    for kind, source in PAYLOADS:
        tracemalloc.start()
        started = time.process_time()
        error = _refusal(source, limits_for(kind))
        # CPU time, not wall time: the render's own limit is wall time, so on a busy machine it
        # stops sooner in CPU terms, while a wall clock would count the other processes' turns.
        seconds = time.process_time() - started
        peak = tracemalloc.get_traced_memory()[1] / MIB
        tracemalloc.stop()
        assert re.search(REASONS[kind], error.reason), (kind, source[:80], error.reason)
        assert str(error).startswith("The model's chat template was refused: ")
        # tracemalloc makes allocating steps several times slower than they are
        assert seconds < QUICK.seconds + 1.5, (source[:80], seconds)
        assert peak < 200, (source[:80], peak)  # 16 Mi characters at most, 4 bytes each
        refused_by_kind[kind] += 1
        worst_seconds, worst_mib = max(worst_seconds, seconds), max(worst_mib, peak)
    tried = Counter(kind for kind, _ in PAYLOADS)
    assert refused_by_kind == tried
    for kind, n in sorted(tried.items()):
        reliability.record(AREA, f"template payloads refused: {kind}", f"{n} of {n}")
    reliability.record(AREA, "template payloads tried (renderer)", len(PAYLOADS))
    reliability.record(
        AREA,
        "slowest refusal / most memory (0.3 s limit)",
        f"{worst_seconds:.2f} s / {worst_mib:.0f} MiB",
    )


def test_a_parse_error_names_its_own_line():
    first_parse_error = next(source for kind, source in PAYLOADS if kind == "parse error")
    assert "line 3" in _refusal(first_parse_error).reason


@pytest.mark.slow
def test_the_default_time_limit_ends_an_endless_loop():
    endless = compile_template(PAYLOADS[14][1])
    started = time.monotonic()
    with pytest.raises(TemplateRefused, match="longer than 5 s"):
        render_template(endless, CONTEXT)
    assert time.monotonic() - started < 7


def test_stop_ends_an_endless_render():
    endless = compile_template(PAYLOADS[14][1])
    rendering, stop = threading.Event(), threading.Event()
    outcome: list[BaseException] = []

    def stopped() -> bool:
        rendering.set()  # the render asks: it is under way
        return stop.is_set()

    def render() -> None:
        try:
            render_template(endless, CONTEXT, RenderLimits(seconds=600), stopped)
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            outcome.append(error)

    worker = threading.Thread(target=render)
    worker.start()
    assert rendering.wait(10)
    pressed = time.monotonic()
    stop.set()
    worker.join(10)
    assert not worker.is_alive() and isinstance(outcome[0], RenderStopped)
    # Stopped by the press, not by its 600 s limit (a generous bound for a busy machine).
    assert time.monotonic() - pressed < 60


def test_a_refused_gguf_template_falls_back_with_a_notice(reliability):
    fallbacks = 0
    for _kind, source in PAYLOADS[::6]:
        chosen = choose_template(source, "gemma3")
        assert chosen.source == "gemma"
        assert "The model's own chat template is not used: " in chosen.notice
        assert "Using the plain gemma template." in chosen.notice
        assert chosen.render([ChatMessage("user", "Hi")]).endswith("<start_of_turn>model\n")
        fallbacks += 1
    reliability.record(AREA, "refused GGUF templates that fell back to a plain one", fallbacks)


REAL_TEMPLATE = (  # the shape of Qwen2.5's: namespace, tojson, loop.last, raise_exception
    "{%- set ns = namespace(system='') -%}"
    "{%- for m in messages -%}"
    "{%- if m['role'] not in ['system', 'user', 'assistant'] -%}"
    "{{ raise_exception('Unknown role ' ~ m['role']) }}{%- endif -%}"
    "<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n"
    "{%- if loop.last and add_generation_prompt %}<|im_start|>assistant\n{% endif -%}"
    "{%- endfor -%}{{ '' if not tools is defined else tools | tojson }}"
)


def test_real_templates_still_render_long_conversations():
    chosen = choose_template(REAL_TEMPLATE, "qwen2")
    assert chosen.source == "gguf" and chosen.notice == ""
    long_chat = [ChatMessage("user" if i % 2 else "assistant", "word " * 400) for i in range(501)]
    text = chosen.render(long_chat)
    assert text.count("<|im_end|>") == 501 and text.endswith("<|im_start|>assistant\n")
