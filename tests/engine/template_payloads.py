"""Hostile chat templates, by kind: what a GGUF from a stranger may carry in
`tokenizer.chat_template`, and the words the refusal must use for each kind."""

from __future__ import annotations

REASONS = {
    "escape": "Python internals",
    "loop": "ran longer than",
    "output bomb": "characters|was given|wide",
    "memory bomb": "characters|bit|quadratic|ran longer than",
    "parse error": "not valid Jinja|nests too deeply",
    "recursion": "too deeply|ran longer than",
}

PAYLOADS: list[tuple[str, str]] = [
    ("escape", "{{ ''.__class__.__mro__[1].__subclasses__() }}"),
    ("escape", "{{ cycler.__init__.__globals__.os.popen('id').read() }}"),
    ("escape", "{{ joiner.__init__.__globals__ }}"),
    ("escape", "{{ namespace.__init__.__globals__ }}"),
    ("escape", "{{ self._TemplateReference__context }}"),
    ("escape", "{{ lipsum.__globals__['os'] }}"),
    ("escape", "{{ '{0.__class__.__base__}'.format('') }}"),
    ("escape", "{{ '{x.__class__}'.format_map({'x': 1}) }}"),
    ("escape", "{{ messages|attr('__class__') }}"),
    ("escape", "{{ messages.append({'role': 'system'}) }}"),
    ("escape", "{% for m in messages %}{{ loop.__class__.__init__.__globals__ }}{% endfor %}"),
    ("escape", "{{ raise_exception.__globals__['__builtins__'] }}"),
    ("escape", "{{ strftime_now.__code__ }}"),
    ("escape", "{{ messages[0].items.__self__.__class__ }}"),
    ("loop", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
    (
        "loop",
        "{% set l = range(100000)|list %}"
        "{% for a in l %}{% for b in l %}{% for c in l %}{% endfor %}{% endfor %}{% endfor %}",
    ),
    (
        "loop",
        "{% for i in range(100000) %}{% for j in range(100000)|select %}{{ '' }}"
        "{% endfor %}{% endfor %}",
    ),
    ("loop", "{% for i in range(100000) %}{{ range(100000)|list|sort|length }}{% endfor %}"),
    ("output bomb", "{{ 'x' * 10**9 }}"),
    ("output bomb", "{{ 'x'|center(1000000000) }}"),
    ("output bomb", "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}"),
    ("output bomb", "{{ '%999999999s'|format('x') }}"),
    ("output bomb", "{{ '{:>999999999}'.format('x') }}"),
    ("output bomb", "{{ 'x'.ljust(10**9) }}"),
    ("output bomb", "{{ ('a' * 100000)|replace('a', 'b' * 100000) }}"),
    ("output bomb", "{{ (['y' * 100000] * 100000)|join }}"),
    ("output bomb", "{{ lipsum(n=1000000) }}"),
    ("output bomb", "{{ lipsum(n=20, max=1000000) }}"),
    ("output bomb", "{{ range(100000)|join(',' * 100000) }}"),
    (
        "memory bomb",
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s|length }}",
    ),
    (
        "memory bomb",
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
        "{% endfor %}",
    ),
    (
        "memory bomb",
        "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}"
        "{% endfor %}",
    ),
    (
        "memory bomb",
        "{% set x %}{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}{% endset %}"
        "{{ x|length }}",
    ),
    ("memory bomb", "{{ 10 ** (10 ** 10) }}"),
    (
        "memory bomb",
        "{% set ns = namespace(n=3) %}{% for i in range(64) %}{% set ns.n = ns.n * ns.n %}"
        "{% endfor %}",
    ),
    ("memory bomb", "{{ ([[1] * 100000] * 100000)|sum(start=[]) }}"),
    (
        "memory bomb",
        "{% set x = 'x' * 4000000 %}{% for i in range(100) %}{% set y = x ~ i %}{% endfor %}",
    ),
    ("parse error", "{% for m in messages %}\n{{ m.content }}\n{% for x in %}\n{% endfor %}"),
    ("parse error", "{{ messages[0].content"),
    ("parse error", "{% endfor %}"),
    ("parse error", "{% if %}yes{% endif %}"),
    ("parse error", "{{ messages | }}"),
    ("parse error", "{% raw %}never closed"),
    ("parse error", "{{ " + "(" * 100000 + "1" + ")" * 100000 + " }}"),
    ("recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
    (
        "recursion",
        "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
    ),
    ("recursion", "{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}"),
    (
        "recursion",
        "{% macro f(n) %}{% if n < 60 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}{% endmacro %}"
        "{{ f(0) }}",
    ),
    (
        "recursion",
        "{% macro f() %}{{ caller() }}{% endmacro %}"
        "{% macro g() %}{% call f() %}{{ g() }}{% endcall %}{% endmacro %}{{ g() }}",
    ),
]
