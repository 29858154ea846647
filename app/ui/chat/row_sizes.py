"""The measured sizes of the message rows, kept by row version (the model's counter: a new one
whenever a row's text or state changes), so a re-layout of thousands of rows reads no message
and a token re-measures the last row only."""

from __future__ import annotations

from PySide6.QtCore import QSize

# A long session's browsing keeps this many messages' versions at most; then all start over.
MAX_MESSAGES = 50_000


class RowSizes:
    """Two caches by row version, each valid at one width: the document's size (height, width
    used) at a column width, and the row's size at a viewport width. A message keeps one
    version in them: its older ones are dropped when a new one is measured, as they will never
    be shown again."""

    def __init__(self) -> None:
        # row version -> (document height, document width) at _documents_width
        self._documents: dict[int, tuple[int, int]] = {}
        self._documents_width = -1
        # row version -> the row's size at _rows_width (a viewport width): QListView asks
        # for every row's size at each re-layout (5,000 times when older messages come in
        # front), so a known size is returned without reading the message
        self._rows: dict[int, QSize] = {}
        self._rows_width = -1
        self._measured_version: dict[int, int] = {}  # message id -> its version in the caches

    def __len__(self) -> int:
        """Messages whose size is kept (one version each)."""
        return len(self._measured_version)

    def document_size(self, version: int, column_width: int) -> tuple[int, int] | None:
        """(document height, document width used) kept for `version` at `column_width`."""
        if column_width != self._documents_width:
            self._documents.clear()
            self._documents_width = column_width
        return self._documents.get(version)

    def keep_document_size(self, message_id: int, version: int, size: tuple[int, int]) -> None:
        """Keep `size` for the message's `version` (after document_size at its width)."""
        self._forget_older_version(message_id, version)
        self._documents[version] = size

    def row_size(self, version: int, width: int) -> QSize | None:
        """The row's size kept for `version` at viewport `width`."""
        if width != self._rows_width:
            self._rows.clear()
            self._rows_width = width
        return self._rows.get(version)

    def keep_row_size(self, version: int, size: QSize) -> None:
        """Keep `size` for `version` (after row_size at its width)."""
        self._rows[version] = size

    def forget(self, message_id: int) -> None:
        """Drop what is kept for a message that left the model."""
        version = self._measured_version.pop(message_id, None)
        if version is not None:
            self._documents.pop(version, None)
            self._rows.pop(version, None)

    def clear(self) -> None:
        self._documents.clear()
        self._rows.clear()
        self._measured_version.clear()

    def _forget_older_version(self, message_id: int, version: int) -> None:
        if len(self._measured_version) > MAX_MESSAGES:
            self.clear()
        older = self._measured_version.get(message_id)
        if older is not None and older != version:
            self._documents.pop(older, None)
            self._rows.pop(older, None)
        self._measured_version[message_id] = version
