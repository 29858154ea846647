"""Hugging Face tokens cut out of text the app writes for people to read or send (crash reports,
the log file): an exception's message or a logged URL could carry one, and a user attaching a
report to a bug must not hand over their token with it."""

from __future__ import annotations

import logging
import os
import re

# User access tokens are "hf_" and 34 letters/digits; be generous about the length.
_TOKEN_PATTERN = re.compile(r"hf_[A-Za-z0-9]{16,}")
HIDDEN = "hf_…(hidden)"
TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def redact(text: str) -> str:
    """`text` with every Hugging Face token hidden: anything shaped like one, and the token in
    the environment whatever its shape."""
    for name in TOKEN_VARIABLES:
        value = (os.environ.get(name) or "").strip()
        if len(value) >= 8:
            text = text.replace(value, HIDDEN)
    return _TOKEN_PATTERN.sub(HIDDEN, text)


class RedactingFormatter(logging.Formatter):
    """A log formatter whose lines never carry a token (arguments and tracebacks included)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))
