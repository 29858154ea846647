"""Loading a model in one dialog: its load settings (context, K/V types, GPU layers, threads), a
live fit for this machine, and Load (Reload for the model loaded now), the choice remembered per
model file (app.load.load_choices; a model never loaded from here gets the default settings)."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.engine.build_info import BackendPairs
from app.kv.advisor import Advice
from app.kv.fit import NO_FIT
from app.kv.kv_types import KvMode
from app.load.load_check import gpu_build
from app.load.load_choices import (
    LiveFit,
    LoadFacts,
    default_choice,
    live_fit,
    read_load_facts,
    remember_choice,
    remembered_choice,
)
from app.load.load_words import DIALOG_ADVICE, load_word
from app.load.profile import LoadProfile
from app.models import starter
from app.models.model_ref import resolve_model
from app.platform import units as fmt
from app.services.local_workers import LocalWorkers
from app.services.tasks import TaskRunner
from app.state.settings import Settings
from app.ui.chat.kv_choice import KvChoice
from app.ui.chat.load_fit import FitLine
from app.ui.chat.model_picker import STARTER
from app.ui.chat.pair_offers import PairOffers
from app.ui.chat.status_bar import model_name
from app.ui.chat.workers_box import WorkersBox
from app.ui.plain_text import plain_label, plain_tooltip

log = logging.getLogger(__name__)

NO_GPU = "CPU only: no GPU layers"
MAX_CONTEXT = 1_048_576


class LoadDialog(QDialog):
    """Signals:
    model_read(): the model's header and this machine's free memory were read; the estimate shows.
    model_unreadable(str): the model could not be opened (the sentence is shown in the dialog).
    fit_changed(object): the live estimate (a LiveFit) was redone for the settings shown.
    load_requested(str, object): Load/Reload pressed: the ref and its LoadProfile (remembered).
    (The workers section's own signals are on `workers_box`.)
    """

    model_read = Signal()
    model_unreadable = Signal(str)
    fit_changed = Signal(object)
    load_requested = Signal(str, object)

    def __init__(
        self,
        ref: str,
        settings: Settings,
        folder: Path,
        pairs: BackendPairs | None = None,
        loaded_path: str | None = None,
        parent: QWidget | None = None,
        local_workers: LocalWorkers | None = None,
    ) -> None:
        """`ref`: a .gguf path or 'starter'; `settings`: the default load settings; `folder`:
        the data folder (where choices are remembered); `pairs`: the K/V pairs the running
        backend's Flash Attention has (a pair it lacks is said, with the pairs it has);
        `loaded_path`: the model loaded now (its dialog offers Reload); `local_workers`: where
        "Start a worker on this computer" starts one (None: the button is hidden)."""
        super().__init__(parent)
        self.setObjectName("loadDialog")
        self._ref, self._settings, self._folder = ref, settings, folder
        self._pairs, self._loaded_path = pairs, loaded_path
        self.facts: LoadFacts | None = None
        self.fit: LiveFit | None = None
        self._showing = False  # the controls are being set: one estimate afterwards
        self._runner = TaskRunner(self, max_threads=1)

        self.title = self._build_title(ref)
        self.about = plain_label(QLabel("Reading the model…"))
        self.about.setWordWrap(True)
        form = self._build_settings_form()
        offers = self.pair_offers = self._build_pair_offers()
        fit_row = self._build_fit_row()
        hint = QLabel(
            "Flash Attention is always on (the int8-K cache runs in it). These settings are "
            "remembered for this model; other models use the default load settings."
        )
        hint.setWordWrap(True)
        hint.setObjectName("hint")
        word = load_word(ref, loaded_path)  # "Reload" for the model loaded now
        self.workers_box = WorkersBox(folder, local_workers, DIALOG_ADVICE.format(word))
        self.workers_box.workers_changed.connect(self._on_setting_changed)
        self.workers_box.checked.connect(self._on_workers_checked)
        self._build_buttons(word)
        self._lay_out(form, offers, fit_row, hint)

        self._show_choice(default_choice(settings, ""))  # until the model is read
        self.n_ctx.valueChanged.connect(self._on_setting_changed)
        self.gpu_layers.valueChanged.connect(self._on_setting_changed)
        self.type_k.currentTextChanged.connect(self._on_setting_changed)
        self.type_v.currentTextChanged.connect(self._on_setting_changed)
        self._show_pair_support()
        self._runner.submit(
            "read", _read, ref, on_done=self._on_model_read, on_error=self._on_model_unreadable
        )

    # ---- the dialog's parts, top to bottom ---------------------------------------------

    def _build_title(self, ref: str) -> QLabel:
        name = f"Starter model: {starter.NAME}" if ref == STARTER else model_name(ref)
        title = plain_label(QLabel(name))
        title.setObjectName("loadDialogTitle")
        title.setStyleSheet("font-size: 13pt; font-weight: 600;")
        return title

    def _build_settings_form(self) -> QFormLayout:
        """The load settings: context length, K and V cache types, GPU layers, CPU threads."""
        self.n_ctx = QSpinBox()
        self.n_ctx.setRange(256, MAX_CONTEXT)
        self.n_ctx.setSingleStep(1024)
        self.n_ctx.setSuffix(" tokens")
        self.n_ctx.setGroupSeparatorShown(True)
        # Auto, the modes that make sense, "More" for the K and V type boxes (kept as ours).
        self.kv_choice = KvChoice()
        self.kv_choice.auto_chosen.connect(self._on_auto_chosen)
        self.type_k, self.type_v = self.kv_choice.type_k, self.kv_choice.type_v
        gpu_row = self._build_gpu_row()
        self.threads = QSpinBox()
        self.threads.setRange(0, 512)
        self.threads.setSpecialValueText("automatic")
        form = QFormLayout()
        form.addRow("Context length", self.n_ctx)
        form.addRow("K/V cache", self.kv_choice)
        form.addRow("GPU layers", gpu_row)
        form.addRow("CPU threads", self.threads)
        return form

    def _build_gpu_row(self) -> QHBoxLayout:
        """The GPU layers box, or on a backend without a GPU a label that says so."""
        self.gpu_layers = QSpinBox()
        self.gpu_layers.setRange(-1, 999)
        self.gpu_layers.setSpecialValueText("all")
        self.no_gpu = QLabel(NO_GPU)
        self.no_gpu.setObjectName("noGpuLayers")
        self.no_gpu.setToolTip(
            "The llama.cpp backend the engine runs has no GPU backend, so every layer runs "
            "on the CPU. The Backends page adds a GPU one."
        )
        self.has_gpu = gpu_build()
        self.gpu_layers.setVisible(self.has_gpu)
        self.no_gpu.setVisible(not self.has_gpu)
        gpu_row = QHBoxLayout()
        gpu_row.setContentsMargins(0, 0, 0, 0)
        gpu_row.addWidget(self.gpu_layers)
        gpu_row.addWidget(self.no_gpu)
        return gpu_row

    def _build_pair_offers(self) -> PairOffers:
        """The warning for a K/V pair the backend lacks, and a button per pair it has."""
        offers = PairOffers(self._pairs)
        offers.pair_chosen.connect(self._choose_pair)
        self.pair_warning, self.pair_buttons = offers.warning, offers.buttons
        return offers

    def _build_fit_row(self) -> QHBoxLayout:
        """The fit line, and under it the button that takes the largest context that fits."""
        self.fit_label = FitLine(self)
        self.fit_button = QPushButton()  # "Use 32,768 tokens": the largest context that fits
        self.fit_button.setObjectName("useLargestFit")
        self.fit_button.hide()
        self.fit_button.clicked.connect(self._on_fit_button_clicked)
        fit_row = QHBoxLayout()
        fit_row.addWidget(self.fit_button)
        fit_row.addStretch(1)
        return fit_row

    def _build_buttons(self, word: str) -> None:
        """Load (Reload for the loaded model), disabled until the model is read, and Cancel."""
        self.buttons = QDialogButtonBox()
        self.load_button = self.buttons.addButton(word, QDialogButtonBox.ButtonRole.AcceptRole)
        self.load_button.setObjectName("loadButton")
        self.load_button.setDefault(True)
        self.load_button.setEnabled(False)  # until the model is read: the choice's key
        self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self._on_load_clicked)
        self.buttons.rejected.connect(self.reject)
        self._use_word(word)

    def _use_word(self, word: str) -> None:  # "Load", or "Reload" for the model loaded now
        self.load_button.setText(word)
        self.setWindowTitle("Reload the model" if word == "Reload" else "Load a model")
        self.workers_box.advice = DIALOG_ADVICE.format(word)

    def _lay_out(
        self, form: QFormLayout, offers: PairOffers, fit_row: QHBoxLayout, hint: QLabel
    ) -> None:
        self._layout = layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.about)
        layout.addLayout(form)
        layout.addWidget(offers)
        layout.addWidget(self.fit_label)
        layout.addLayout(fit_row)
        layout.addWidget(self.workers_box)
        layout.addWidget(hint)
        layout.addStretch(1)  # spare height below the text, not between its lines
        layout.addWidget(self.buttons)
        self.setMinimumWidth(520)

    # ---- the model and the estimate ----------------------------------------------------

    def _is_loaded(self, ref_or_path: str) -> bool:
        return self._loaded_path is not None and (
            ref_or_path == self._loaded_path
            or (self.facts is not None and self.facts.model_path == self._loaded_path)
        )

    def _on_model_read(self, facts: LoadFacts) -> None:
        self.facts = facts
        header = facts.header
        trained = f", trained for {header.context_length:,} tokens" if header.context_length else ""
        self.about.setText(f"{Path(facts.model_path).name}: {fmt.size(facts.file_size)}{trained}.")
        self.about.setToolTip(plain_tooltip(facts.model_path))
        remembered = remembered_choice(self._folder, facts.model_path)
        self._show_choice(
            remembered or default_choice(self._settings, facts.model_path, header.context_length)
        )
        if self._is_loaded(facts.model_path):  # a ref that names the loaded model's file
            self._use_word("Reload")
        self.model_read.emit()
        self._estimate()
        self.kv_choice.ask_advisor(self._runner, facts.model_path, self.gpu_layers.value())

    def _on_model_unreadable(self, message: str, _error: BaseException) -> None:
        self.about.setText(f"Could not open the model: {message}")
        self.fit_label.setText("")
        self.load_button.setEnabled(False)
        self.model_unreadable.emit(message)

    def _show_choice(self, choice: LoadProfile) -> None:
        self._showing = True
        self.n_ctx.setValue(choice.n_ctx)
        self.type_k.setCurrentText(choice.kv.k.name)
        self.type_v.setCurrentText(choice.kv.v.name)
        self.gpu_layers.setValue(choice.n_gpu_layers)
        self.threads.setValue(choice.n_threads or 0)
        self.workers_box.set_workers(choice.rpc_workers, choice.layer_split)
        self._showing = False

    def _on_setting_changed(self) -> None:
        if not self._showing:
            self._estimate()

    def _estimate(self) -> None:
        """Redo the estimate for the settings shown: pure arithmetic on what was read, so it
        runs on every change without a thread."""
        self._show_pair_support()
        if self.facts is None:
            return
        choice = self.chosen()
        split = bool(choice.rpc_workers)
        if split:  # this machine's fit alone says nothing: the workers' table does
            self.workers_box.recheck(choice)
        self.fit_label.setVisible(not split)
        fit = live_fit(self.facts, choice, DIALOG_ADVICE.format(self.load_button.text()))
        self.fit = fit
        verdict = fit.mode_fit.verdict if fit.mode_fit else NO_FIT
        if fit.refusal is not None:
            verdict = NO_FIT
        self.fit_label.show_fit(fit, choice, verdict)
        self._update_load_button()
        largest = fit.mode_fit.largest_n_ctx if fit.mode_fit else 0
        offer = not split and fit.refusal is not None and 0 < largest < choice.n_ctx
        self.fit_button.setText(f"Use {largest:,} tokens (the most that fit)" if offer else "")
        self.fit_button.setVisible(offer)
        self._grow()
        self.fit_changed.emit(fit)

    def _grow(self) -> None:
        height = self._layout.totalHeightForWidth(self.width())  # wrapped at this width
        if height > self.height():  # a longer sentence or the offer: grow, never squeeze
            self.resize(self.width(), height)

    def _update_load_button(self) -> None:
        """Load needs the model read; across workers their checks' answer (a worker that is
        down or cannot run the K/V pair is refused, memory can be forced), else this
        machine's fit (its refusal forceable)."""
        if self.facts is None or self.fit is None:
            self.load_button.setEnabled(False)
        elif self.workers_box.workers:
            self.load_button.setEnabled(self.workers_box.allows_load)
        else:
            self.load_button.setEnabled(self.fit.refusal is None or self.fit.forceable)

    def _on_workers_checked(self, _result: object) -> None:
        self._update_load_button()
        self._grow()

    def _on_auto_chosen(self, advice: Advice) -> None:
        """Auto: the advisor's context too (kv_choice has set its K/V types: one estimate)."""
        self.n_ctx.setValue(advice.n_ctx or self.n_ctx.value())

    def _on_fit_button_clicked(self) -> None:
        if self.fit is not None and self.fit.mode_fit is not None:
            self.n_ctx.setValue(self.fit.mode_fit.largest_n_ctx)

    # ---- K/V pairs the backend runs ------------------------------------------------------

    def _choose_pair(self, mode: KvMode) -> None:
        self._showing = True  # one estimate for the pair, not one per box
        self.type_k.setCurrentText(mode.k.name)
        self.type_v.setCurrentText(mode.v.name)
        self._showing = False
        self._estimate()

    def _show_pair_support(self) -> None:
        self.pair_offers.show_support(self.chosen_mode())

    # ---- the choice --------------------------------------------------------------------

    def chosen_mode(self) -> KvMode:
        return KvMode.of(self.type_k.currentText(), self.type_v.currentText())

    def chosen(self) -> LoadProfile:
        """The settings shown, as a load of the model read would use them."""
        return LoadProfile(
            self.facts.model_path if self.facts is not None else "",
            n_ctx=self.n_ctx.value(),
            kv=self.chosen_mode(),
            n_gpu_layers=self.gpu_layers.value(),
            n_threads=self.threads.value() or None,
            rpc_workers=self.workers_box.workers,
            layer_split=self.workers_box.layer_split,
        )

    def _on_load_clicked(self) -> None:
        if self.facts is None or not self.load_button.isEnabled():
            return
        profile = self.chosen()
        try:
            remember_choice(self._folder, profile)
        except OSError as error:  # the load goes ahead; only the memory of it is lost
            log.warning("the load settings could not be remembered: %s", error)
        self.accept()
        self.load_requested.emit(self._ref, profile)


def _read(ref: str) -> LoadFacts:
    """Off the GUI thread: the file `ref` names (the starter is joined on first use), its
    header, and the free memory a load would go into."""
    return read_load_facts(resolve_model(ref, allow_pull=False))
