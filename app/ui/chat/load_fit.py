"""The load dialog's fit line: the live estimate in one or two sentences, coloured by verdict
with the Models page's colours (FitLine), and the words themselves (describe_fit)."""

from __future__ import annotations

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QLabel, QWidget

from app.kv.fit import FITS, MARGIN, NO_FIT, TIGHT, ModeFit
from app.load.load_choices import LiveFit
from app.load.profile import LoadProfile
from app.platform import units as fmt
from app.ui.models.verdicts import DARK_VERDICT_COLOURS, VERDICT_COLOURS, budget_text
from app.ui.plain_text import plain_label
from app.ui.theme_colours import DARK, LIGHT, scheme_of


def fit_style(verdict: str, scheme: str = LIGHT) -> str:
    """The fit line's colours: the Models page's, by verdict, in the look `scheme`."""
    colours = DARK_VERDICT_COLOURS if scheme == DARK else VERDICT_COLOURS
    background, foreground = colours[verdict]
    return (
        f"background: {background.name()}; color: {foreground.name()}; "
        "border-radius: 6px; padding: 8px;"
    )


def largest_sentence(mode_fit: ModeFit) -> str:
    """The most tokens that fit, and (when fewer) how many keep the margin the KV advisor and
    Auto go by, so a bigger number here than Auto's is explained where it is shown."""
    largest, spare = mode_fit.largest_n_ctx, mode_fit.largest_n_ctx_with_margin
    text = f"At most {largest:,} tokens fit with these settings"
    if spare == largest:
        return text + "."
    kept = f"{spare:,}" if spare else "none"
    return f"{text}, {kept} with the estimate's {MARGIN:.0%} kept spare (as Auto keeps it)."


def describe_fit(fit: LiveFit, choice: LoadProfile) -> str:
    """The estimate in one or two sentences, with the Models page's numbers; a load that would
    be refused says it in load_check's words instead."""
    mode_fit = fit.mode_fit
    if fit.refusal is not None:
        return fit.refusal
    if mode_fit is None or fit.estimate is None:
        return ""
    budget = fit.estimate.budget
    head = {FITS: "Fits", TIGHT: "Tight fit", NO_FIT: "Does not fit"}.get(
        mode_fit.verdict, mode_fit.verdict
    )
    need = mode_fit.need
    parts = ""
    if need is not None:
        parts = (
            f" (weights {fmt.size(need.weights_bytes)}, KV cache {choice.kv.label} at "
            f"{choice.n_ctx:,} tokens {fmt.size(need.kv_bytes)}, buffers "
            f"{fmt.size(need.compute_bytes + need.output_bytes)})"
        )
    text = (
        f"{head}: needs {fmt.size(mode_fit.total_bytes)} of {fmt.size(budget.bytes)} "
        f"{budget_text(budget)}{parts}."
    )
    if mode_fit.largest_n_ctx:
        text += " " + largest_sentence(mode_fit)
    if mode_fit.verdict == TIGHT:
        text += " That is within the estimate's 10% margin: it may not load."
    return text


class FitLine(QLabel):
    """The estimate for the settings shown, three lines high so the dialog does not jump."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Estimating the memory it needs…", parent)
        plain_label(self)
        self.setObjectName("loadFit")
        self.setWordWrap(True)
        self.setMinimumHeight(self.fontMetrics().lineSpacing() * 3 + 16)
        self._verdict = ""

    def show_fit(self, fit: LiveFit, choice: LoadProfile, verdict: str) -> None:
        self.setText(describe_fit(fit, choice))
        self._verdict = verdict
        self.setStyleSheet(fit_style(verdict, scheme_of(self.palette())))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        palette = (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange)
        if event.type() in palette and self._verdict:  # the look changed: its colours too
            style = fit_style(self._verdict, scheme_of(self.palette()))
            if style != self.styleSheet():
                self.setStyleSheet(style)
