"""The load settings a user chose for each model file, and the live fit estimate of a choice.

Defaults (context length, K/V cache types, GPU layers, threads) stay in settings.json
(app.state.settings); what the user chose in the load dialog for one model file is kept in
<data>/model_load_settings.json, keyed by the file's absolute path, so the next load of that
file uses its last settings and every other model the defaults. The file is written
atomically; on read, a damaged file is set aside (app.platform.state_files) and an entry of the
wrong shape is dropped alone.

    facts = read_load_facts(path)               # blocking: header, size, free memory
    fit = live_fit(facts, choice)               # pure and quick: redo it on every change
    fit.mode_fit.verdict, fit.refusal           # the Models page's numbers; load_check's words
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.kv.fit import FitEstimate, ModeFit, estimate_fit
from app.kv.kv_types import KV_TYPE_NAMES, KvMode
from app.load.choices_file import LOAD_CHOICES_STATE_FILE
from app.load.load_check import check_load_fits, free_memory_for, gpu_build
from app.load.profile import LoadProfile
from app.load.rpc_workers import MAX_WORKERS, check_address, good_layer_split
from app.models.gguf_read import read_gguf_header
from app.models.model_files import model_size
from app.platform.atomic_write import write_atomically
from app.platform.errors import BadInputError, ContextTooLargeError
from app.platform.state_files import read_json_state, set_aside

if TYPE_CHECKING:
    from app.models.gguf_header import GgufHeader
    from app.platform.probes import FreeMemory
    from app.state.settings import Settings

log = logging.getLogger(__name__)

FILE_NAME = LOAD_CHOICES_STATE_FILE.name
VERSION = LOAD_CHOICES_STATE_FILE.version
MAX_MODELS = 200  # the oldest choices go first; a model not loaded for that long uses defaults
_MAX_CONTEXT = 1 << 24  # as app.state.settings: a bigger number is a typo
_MAX_PATH_CHARS = 4096


def default_choice(
    settings: Settings, model_path: str, n_ctx_train: int | None = None
) -> LoadProfile:
    """The default load settings for the file at `model_path`; the context no longer than the
    model was trained for (a longer one would be refused before the load)."""
    n_ctx = min(settings.n_ctx, n_ctx_train) if n_ctx_train else settings.n_ctx
    return LoadProfile(
        model_path,
        n_ctx=n_ctx,
        kv=settings.kv_mode,
        n_gpu_layers=settings.n_gpu_layers,
        n_threads=settings.n_threads,
    )


def _good(entry: object) -> bool:
    """Whether a stored entry has the shape remember_choice writes (the types checked as
    SettingsFile checks its fields)."""

    def whole(value: object, low: int, high: int) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high

    return (
        isinstance(entry, dict)
        and whole(entry.get("n_ctx"), 1, _MAX_CONTEXT)
        and entry.get("type_k") in KV_TYPE_NAMES
        and entry.get("type_v") in KV_TYPE_NAMES
        and whole(entry.get("n_gpu_layers"), -1, 1 << 20)
        and (entry.get("n_threads") is None or whole(entry.get("n_threads"), 1, 4096))
        and _good_workers(entry.get("rpc_workers", []))
        and _good_split(entry.get("layer_split", []))
    )


def _good_split(shares: object) -> bool:
    if not isinstance(shares, list) or len(shares) > MAX_WORKERS:
        return False
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in shares):
        return False
    return not shares or good_layer_split(tuple(float(x) for x in shares))


def _good_workers(workers: object) -> bool:
    if not isinstance(workers, list) or len(workers) > MAX_WORKERS:
        return False
    try:
        for worker in workers:
            if not isinstance(worker, str):
                return False
            check_address(worker)
    except BadInputError:
        return False
    return len(set(workers)) == len(workers)


def read_choices(folder: Path) -> dict[str, LoadProfile]:
    """Every model's remembered choice, by absolute path (oldest first). A damaged file is set
    aside and counts as empty; an entry of the wrong shape is left out (and logged)."""
    path = folder / FILE_NAME
    read = read_json_state(path, VERSION)
    if read.damage is not None or (read.value is not None and not isinstance(read.value, dict)):
        backup = set_aside(path)
        log.warning("%s was damaged; set aside as %s", path, backup)
        return {}
    models = read.value.get("models", {}) if isinstance(read.value, dict) else {}
    choices: dict[str, LoadProfile] = {}
    for key, entry in models.items() if isinstance(models, dict) else ():
        if 0 < len(key) <= _MAX_PATH_CHARS and _good(entry):
            choices[key] = LoadProfile(
                key,
                n_ctx=entry["n_ctx"],
                kv=KvMode.of(entry["type_k"], entry["type_v"]),
                n_gpu_layers=entry["n_gpu_layers"],
                n_threads=entry["n_threads"],
                rpc_workers=tuple(entry.get("rpc_workers", [])),
                layer_split=tuple(float(x) for x in entry.get("layer_split", [])),
            )
        else:
            log.warning("load settings for %r were not usable; the defaults apply", key[:200])
    return choices


def remembered_choice(folder: Path, model_path: str) -> LoadProfile | None:
    return read_choices(folder).get(model_path)


def remember_choice(folder: Path, choice: LoadProfile) -> None:
    """Keep what the user chose of `choice` for its file (the model path, absolute), so the
    next load of that file starts from it. Only a memory: the load itself takes the profile
    it is handed, never this file."""
    choices = read_choices(folder)
    choices.pop(choice.model_path, None)  # re-inserted last: the most recent choice
    choices[choice.model_path] = choice
    kept = list(choices.items())[-MAX_MODELS:]
    models: dict[str, dict[str, object]] = {}
    for key, kept_choice in kept:
        models[key] = {
            "n_ctx": kept_choice.n_ctx,
            "type_k": kept_choice.kv.k.name,
            "type_v": kept_choice.kv.v.name,
            "n_gpu_layers": kept_choice.n_gpu_layers,
            "n_threads": kept_choice.n_threads,
            "rpc_workers": list(kept_choice.rpc_workers),
            "layer_split": list(kept_choice.layer_split),
        }
    write_atomically(folder / FILE_NAME, json.dumps({"version": VERSION, "models": models}))


def choice_for(folder: Path, settings: Settings, model_path: Path) -> LoadProfile:
    """What a load of the file at `model_path` (absolute) uses: its remembered choice, else
    the defaults (reads the file's header then: call it off the GUI thread)."""
    remembered = remembered_choice(folder, str(model_path))
    if remembered is not None:
        return remembered

    return default_choice(settings, str(model_path), read_gguf_header(model_path).context_length)


@dataclass(frozen=True)
class LoadFacts:
    """What the live estimate needs of a model file and this machine, read once."""

    model_path: str
    header: GgufHeader
    file_size: int
    gpu_build: bool  # the engine's llama.cpp has a GPU backend
    budgets: dict[int, FreeMemory]  # by _budget_key of the GPU layers

    def budget(self, n_gpu_layers: int) -> FreeMemory:
        return self.budgets[_budget_key(n_gpu_layers, self.header.block_count)]


def _budget_key(n_gpu_layers: int, n_layers: int) -> int:
    """The three memories free_memory_for tells apart: none offloaded (0), some (1), all (-1)."""
    if n_gpu_layers == 0:
        return 0
    return 1 if 0 < n_gpu_layers <= n_layers else -1


def read_load_facts(model_path: Path) -> LoadFacts:
    """The header, the size and the free memory a load of `model_path` would go into, for
    each GPU-layer setting (blocking: call it off the GUI thread)."""

    header = read_gguf_header(model_path)
    n_layers = header.block_count
    # One representative per key: free_memory_for answers alike within each.
    budgets = {key: free_memory_for(layers, n_layers) for key, layers in ((0, 0), (1, 1), (-1, -1))}
    return LoadFacts(str(model_path), header, model_size(model_path), gpu_build(), budgets)


@dataclass(frozen=True)
class LiveFit:
    """A choice against this machine: the Models page's estimate for its one KV mode, and the
    sentence a load would be refused with (app.load.load_check), if it would be."""

    estimate: FitEstimate | None  # None: the K/V pair cannot be estimated for this model
    refusal: str | None
    forceable: bool = True  # the refusal can be overridden ("Load anyway")

    @property
    def mode_fit(self) -> ModeFit | None:
        return self.estimate.modes[0] if self.estimate else None


def live_fit(facts: LoadFacts, choice: LoadProfile, advice: str) -> LiveFit:
    """The estimate for `choice` (estimate_fit, as the Models page computes it) and the refusal
    check_load_fits would raise; `advice` ends that sentence. Quick: no file or probe is read."""

    budget = facts.budget(choice.n_gpu_layers)
    try:
        estimate = estimate_fit(facts.header, facts.file_size, choice.n_ctx, budget, (choice.kv,))
    except BadInputError as error:  # e.g. llama.cpp refuses this K/V type for this model
        return LiveFit(None, str(error), forceable=False)
    try:
        check_load_fits(facts.header, choice, budget, file_size=facts.file_size, advice=advice)
    except ContextTooLargeError as error:
        return LiveFit(estimate, str(error), forceable=error.forceable)
    return LiveFit(estimate, None)
