"""The advisor's measurements, kept per model file (by its sha256) in
<data>/kv_measurements.sqlite3, so every Compare run and every short advisor run feeds the
next advice, in the window and on the command line alike.

A model file's sha256 is read once and remembered with the file's path, size and
modification time (hashing a 20 GB file takes a minute); a file changed in place is hashed
again. A damaged database is set aside (`<name>.bak-<time>`) and a fresh one started: the
measurements are worth keeping, never worth a crash.

    store = MeasurementStore(data_dir())
    model = store.identity(path, header)
    store.add(model, [ModeMeasurement(...), ...], source="compare")
    store.measurements()            # every model's, for app.kv.advisor.advise
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

from app.kv.advisor import ModelIdentity, ModelMeasurements, ModeMeasurement
from app.models.gguf_header import GgufHeader
from app.platform.state_files import set_aside

log = logging.getLogger(__name__)

FILE_NAME = "kv_measurements.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS models (
    sha256 TEXT PRIMARY KEY, file_name TEXT NOT NULL, architecture TEXT NOT NULL,
    parameters INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY, sha256 TEXT NOT NULL REFERENCES models(sha256), mode TEXT NOT NULL,
    mean_kl_divergence REAL, top1_agreement REAL, scored_tokens INTEGER NOT NULL,
    decode_tokens_per_second REAL, depth INTEGER NOT NULL, source TEXT NOT NULL,
    measured_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS file_hashes (
    path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL);
"""


def sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class MeasurementStore:
    """The measurements in `folder` (the data folder). Each call opens the database for
    itself, so the GUI's threads and a `kvstudio` process can use it side by side."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE_NAME

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        try:
            connection = self._open()
        except sqlite3.DatabaseError as error:
            log.warning("%s is damaged (%s); set aside and started afresh", self.path, error)
            set_aside(self.path)
            connection = self._open()
        with closing(connection), connection:  # commits at the end, rolls back on an error
            yield connection

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=10)
        try:
            connection.executescript(_SCHEMA)
        except sqlite3.DatabaseError:
            connection.close()
            raise
        return connection

    def sha256(self, path: Path) -> str:
        """The file's sha256, read again only when its size or modification time changed."""
        info = path.stat()
        key = str(path.resolve())
        with self._connection() as db:
            row = db.execute(
                "SELECT sha256 FROM file_hashes WHERE path = ? AND size = ? AND mtime_ns = ?",
                (key, info.st_size, info.st_mtime_ns),
            ).fetchone()
        if row is not None:
            return str(row[0])
        digest = sha256_of_file(path)
        with self._connection() as db:
            db.execute(
                "INSERT OR REPLACE INTO file_hashes VALUES (?, ?, ?, ?)",
                (key, info.st_size, info.st_mtime_ns, digest),
            )
        return digest

    def identity(self, path: Path, header: GgufHeader) -> ModelIdentity:
        return ModelIdentity(
            self.sha256(path), path.name, header.architecture, header.parameter_count or 0
        )

    def add(
        self, model: ModelIdentity, modes: Sequence[ModeMeasurement], source: str = "compare"
    ) -> None:
        """Keep one run's measurements of `model` (older ones stay: speed at several depths)."""
        with self._connection() as db:
            db.execute(
                "INSERT OR REPLACE INTO models VALUES (?, ?, ?, ?)",
                (model.sha256, model.file_name, model.architecture, model.parameters),
            )
            db.executemany(
                "INSERT INTO measurements (sha256, mode, mean_kl_divergence, top1_agreement, "
                "scored_tokens, decode_tokens_per_second, depth, source, measured_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        model.sha256,
                        m.mode,
                        m.mean_kl_divergence,
                        m.top1_agreement,
                        m.scored_tokens,
                        m.decode_tokens_per_second,
                        m.depth,
                        source,
                        m.measured_at or time.time(),
                    )
                    for m in modes
                ],
            )

    def measurements(self) -> list[ModelMeasurements]:
        """Every measured model with its measurements, oldest first."""
        with self._connection() as db:
            models = db.execute(
                "SELECT sha256, file_name, architecture, parameters FROM models"
            ).fetchall()
            rows = db.execute(
                "SELECT sha256, mode, mean_kl_divergence, top1_agreement, scored_tokens, "
                "decode_tokens_per_second, depth, measured_at FROM measurements ORDER BY id"
            ).fetchall()
        by_model: dict[str, list[ModeMeasurement]] = {}
        for sha, *values in rows:
            by_model.setdefault(sha, []).append(ModeMeasurement(*values))
        return [
            ModelMeasurements(ModelIdentity(*model), tuple(by_model.get(model[0], ())))
            for model in models
        ]

    def for_model(self, sha256: str) -> ModelMeasurements | None:
        return next((m for m in self.measurements() if m.model.sha256 == sha256), None)
