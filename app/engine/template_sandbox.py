"""The sandbox a chat template from a downloaded file runs in, with limits it cannot get around.

jinja2's ImmutableSandboxedEnvironment keeps Python objects out of reach; on top of it every
loop step, call, attribute and item lookup passes one check (time, Stop), and everything that
can make a big value (`*`, `**`, `+`, `%`, `~`, filters, method calls, output) is sized before
or as it is made. Why checks inside the render rather than a timer around it: Python cannot
interrupt a loop in another thread, and a process per reply costs more than the render.
Constant folding is off, so no part of a template runs while it is compiled.
"""

from __future__ import annotations

import contextvars
import functools
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from dataclasses import dataclass

from jinja2 import BaseLoader, Environment, Template, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError, TemplateError, TemplateSyntaxError
from jinja2.nodes import EvalContext
from jinja2.runtime import Context, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from app.platform.errors import AppError, BadInputError
from app.platform.safe_text import safe_text


class ChatTemplateError(BadInputError):
    """The model's chat template could not render the conversation."""


class TemplateRefused(ChatTemplateError):
    """The template broke a limit or the sandbox; `reason` says which, in words."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"The model's chat template was refused: {reason}.")


class RenderStopped(AppError):
    """Stop was pressed while the template rendered."""


@dataclass(frozen=True)
class RenderLimits:
    seconds: float = 5.0
    max_source_chars: int = 256 * 1024  # real templates are under 30 KiB
    max_value_chars: int = 4 * 1024 * 1024  # any one string, list or the whole prompt
    max_made_chars: int = 16 * 1024 * 1024  # all a render makes: the memory bound
    max_number: int = 100_000  # a width or count given to a filter or method (jinja's range cap)


@dataclass
class _Budget:
    limits: RenderLimits
    deadline: float
    stopped: Callable[[], bool] | None
    steps: int = 0
    made: int = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps & 15 == 0:  # the clock and Stop every 16 steps keep the check cheap
            self.check_time()

    def check_time(self) -> None:
        if self.stopped is not None and self.stopped():
            raise RenderStopped("Stopped while the chat template was rendering.")
        if time.monotonic() > self.deadline:
            raise TemplateRefused(f"it ran longer than {self.limits.seconds:g} s")

    def expect(self, chars: int, what: str) -> None:
        if chars > self.limits.max_value_chars:
            raise TemplateRefused(
                f"{what} would make {chars:,} characters "
                f"(the limit is {self.limits.max_value_chars:,})"
            )

    def made_value(self, value: object, what: str) -> None:
        size = _size(value)
        self.expect(size, what)
        self.made += size
        if size > 4096:  # a big value took time to make: look at the clock now
            self.check_time()
        if self.made > self.limits.max_made_chars:
            raise TemplateRefused(
                f"it made over {self.limits.max_made_chars:,} characters in all (a memory bomb)"
            )


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("budget", default=None)


def _budget() -> _Budget:
    budget = _BUDGET.get()
    if budget is None:  # jinja tries constant filters at compile time: only render runs them
        raise RuntimeError("chat templates run only inside render()")
    return budget


def _size(value: object) -> int:
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return len(value)
    return 0


def _number(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value)
    return None


_DIGITS = re.compile(r"\d+")


def _check_call(name: str, values: list[object]) -> None:
    """Refuse a call whose result could be too big, before it is made (a width of 10**9,
    a long string repeated by a count, a format string asking for a huge field)."""
    budget = _budget()
    limits = budget.limits
    numbers = [n for n in map(_number, values) if n is not None]
    for n in numbers:
        if n > limits.max_number:
            raise TemplateRefused(f"{name} was given {n:,} (the limit is {limits.max_number:,})")
    sizes = sorted((_size(v) for v in values), reverse=True) + [0, 0]
    factor = max(sizes[1], max(numbers, default=0), 1)
    if name in ("format", "format_map") or name == "%":
        fields = [len(d) for d in _DIGITS.findall(values[0])] if isinstance(values[0], str) else []
        if fields and max(fields) > 6:
            raise TemplateRefused(f"{name} asked for a field over a million characters wide")
        widest = max((int(d) for d in _DIGITS.findall(str(values[0]))), default=0)
        factor = max(factor, widest)
    budget.expect(sizes[0] * factor, name)


def _check_join(items: object, separator: object) -> None:
    if isinstance(items, Sized):
        if isinstance(items, (list, tuple)):
            chars = sum(len(i) if isinstance(i, str) else 20 for i in items)
        else:
            chars = 20 * len(items)
        _budget().expect(chars + len(items) * _size(separator), "join")


def _guard_filter(name: str, function: Callable[..., object]) -> Callable[..., object]:
    @functools.wraps(function)  # keeps jinja's pass_context/pass_environment marks
    def guarded(*args: object, **kwargs: object) -> object:
        budget = _budget()
        budget.step()
        first = sum(isinstance(a, (Context, EvalContext, Environment)) for a in args)
        joined = args[first] if name == "join" and len(args) > first else None
        if isinstance(joined, Iterable) and not isinstance(joined, Sized):
            # a generator (map, select) is sized by listing it: its source bounds it
            args = (*args[:first], list(_steps(joined)), *args[first + 1 :])
        values = [*args[first:], *kwargs.values()]
        if name == "join" and values:
            _check_join(values[0], values[1] if len(values) > 1 else "")
        elif name == "sum" and not isinstance(kwargs.get("start", 0), (int, float)):
            raise TemplateRefused("sum was asked to add lists or strings (quadratic time)")
        else:
            _check_call(name, values)
        result = function(*args, **kwargs)
        budget.made_value(result, name)
        return result

    return guarded


def _steps(iterable: Iterable[object]) -> Iterator[object]:
    budget = _budget()
    for item in iterable:
        budget.step()
        yield item


def _output(value: object) -> str:
    text = value if isinstance(value, str) else str(value)
    budget = _budget()
    budget.step()
    budget.made_value(text, "the output")
    return text


def _made(value: object) -> object:
    _budget().made_value(value, "~")
    return value


def _limited_lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    from jinja2.utils import generate_lorem_ipsum

    if n > 20 or max > 200:
        raise TemplateRefused(f"lipsum was asked for {n:,} paragraphs of up to {max:,} words")
    return str(generate_lorem_ipsum(n=n, html=html, min=min, max=max))


_limited_lipsum.__name__ = "lipsum"


def _filter(node: nodes.Node, name: str) -> nodes.Filter:
    guarded = nodes.Filter(node, name, [], [], None, None)
    guarded.set_lineno(node.lineno or 1)
    return guarded


class _AddChecks(NodeTransformer):
    """Puts a check into every loop, every output and every `~` of a parsed template."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = _filter(node.iter, "__kv_steps")
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return _filter(node, "__kv_made")

    def visit_Output(self, node: nodes.Output) -> nodes.Node:
        self.generic_visit(node)
        node.nodes = [
            _filter(nodes.Const(child.data, lineno=child.lineno), "__kv_out")
            if isinstance(child, nodes.TemplateData)
            else _filter(child, "__kv_out")
            for child in node.nodes
        ]
        return node


class _CheckedCodeGenerator(CodeGenerator):
    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        _AddChecks().visit(node)
        super().visit_Template(node, frame)


class LimitedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox, with every call, lookup and size-changing operator counted and sized."""

    code_generator_class = _CheckedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self) -> None:
        # optimized=False: jinja's optimizer would run constant parts (say "x" * 10**9)
        # while compiling, outside any limit.
        super().__init__(loader=BaseLoader(), trim_blocks=True, lstrip_blocks=True)
        self.optimized = False
        self.filters = {name: _guard_filter(name, f) for name, f in self.filters.items()}
        self.filters["__kv_steps"] = _steps
        self.filters["__kv_out"] = _output
        self.filters["__kv_made"] = _made
        self.globals["lipsum"] = _limited_lipsum

    def call_binop(self, context: Context, operator: str, left: object, right: object) -> object:
        budget = _budget()
        budget.step()
        if operator == "**":
            base, power = _number(left), _number(right)
            if base is not None and power is not None and base > 1:
                bits = power * math.log2(base)
                if bits > 65_536:
                    raise TemplateRefused(f"** would make a {int(bits):,}-bit number")
        elif operator == "*":
            a, b = _number(left), _number(right)
            if a is not None and b is not None:
                if a.bit_length() + b.bit_length() > 65_536:
                    raise TemplateRefused("* would make a number over 65,536 bits")
            else:
                budget.expect(max(_size(left), 1) * (a or b or _size(right) or 1), "*")
        elif operator == "+":
            budget.expect(_size(left) + _size(right), "+")
        elif operator == "%":
            _check_call("%", [left, *(right if isinstance(right, tuple) else (right,))])
        result = super().call_binop(context, operator, left, right)
        budget.made_value(result, operator)
        return result

    def unsafe_undefined(self, obj: object, attribute: str) -> Undefined:
        # jinja returns an Undefined that prints as "": an escape attempt is refused instead
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
        )

    def getattr(self, obj: object, attribute: str) -> object:
        _budget().step()
        return super().getattr(obj, attribute)

    def getitem(self, obj: object, argument: object) -> object:
        _budget().step()
        result = super().getitem(obj, argument)
        if isinstance(argument, slice):
            _budget().made_value(result, "a slice")
        return result

    def call(
        __self,  # noqa: N805 - jinja's own signature, so keyword arguments pass through
        __context: Context,
        __obj: object,
        *args: object,
        **kwargs: object,
    ) -> object:
        budget = _budget()
        budget.step()
        target = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
        receiver = getattr(target, "__self__", None)
        name = getattr(target, "__name__", "a call")
        if name == "join" and isinstance(receiver, str) and args:
            _check_join(args[0], receiver)
        else:
            _check_call(name, [receiver, *args, *kwargs.values()])
        result = super().call(__context, __obj, *args, **kwargs)
        budget.made_value(result, name)
        return result


def compile_template(source: str, limits: RenderLimits | None = None) -> Template:
    """The compiled template, or TemplateRefused naming why it cannot be used."""
    limits = limits or RenderLimits()
    if len(source) > limits.max_source_chars:
        raise TemplateRefused(f"it is longer than {limits.max_source_chars:,} characters")
    env = LimitedEnvironment()
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(source)
    except TemplateSyntaxError as error:
        raise TemplateRefused(
            f"it is not valid Jinja (line {error.lineno}: {safe_text(error.message or '', 200)})"
        ) from error
    except TemplateError as error:
        raise TemplateRefused(f"it is not valid Jinja ({safe_text(str(error), 200)})") from error
    except (RecursionError, MemoryError) as error:
        raise TemplateRefused("it nests too deeply to compile") from error


def render_template(
    template: Template,
    context: Mapping[str, object],
    limits: RenderLimits | None = None,
    stopped: Callable[[], bool] | None = None,
) -> str:
    """Render within `limits`; `stopped()` turning true (Stop) raises RenderStopped.

    Raises TemplateRefused for a limit or the sandbox, ChatTemplateError for an error the
    template raised itself (raise_exception, a missing key)."""
    limits = limits or RenderLimits()
    budget = _Budget(limits, time.monotonic() + limits.seconds, stopped)
    token = _BUDGET.set(budget)
    try:
        pieces: list[str] = []
        chars = 0
        for piece in template.generate(**context):
            chars += len(piece)
            budget.expect(chars, "the output")
            pieces.append(piece)
        return "".join(pieces)
    except (TemplateRefused, RenderStopped):
        raise
    except SecurityError as error:
        raise TemplateRefused(
            f"it tried to reach Python internals ({safe_text(str(error), 160)})"
        ) from error
    except RecursionError as error:
        raise TemplateRefused("it calls itself too deeply") from error
    except MemoryError as error:
        raise TemplateRefused("it ran out of memory") from error
    except OverflowError as error:
        raise TemplateRefused(f"it made a number too large ({error})") from error
    except TemplateError as error:
        message = safe_text(str(error), 300)
        raise ChatTemplateError(
            f"The model's chat template failed: {message.rstrip('.')}."
        ) from error
    except Exception as error:  # noqa: BLE001 - any Python error inside a template is its own
        message = safe_text(f"{type(error).__name__}: {error}", 300)
        raise ChatTemplateError(
            f"The model's chat template failed: {message.rstrip('.')}."
        ) from error
    finally:
        _BUDGET.reset(token)


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _strftime_now(fmt: str) -> str:
    import datetime

    return datetime.datetime.now().strftime(fmt)
