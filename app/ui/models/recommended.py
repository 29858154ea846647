"""Discover's "Recommended" list: small chat models with size, licence and a fit verdict for
this machine, shown before the Hub is asked anything (app.models.hub.curated_models)."""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import QHeaderView, QTableView

from app.kv.fit import FITS, TIGHT, FitEstimate, ModeFit
from app.kv.kv_types import DEFAULT_KV_MODE
from app.load.fit_speed import (
    Bandwidth,
    SpeedEstimate,
    bandwidth_for,
    estimate_speed,
    speed_sentence,
)
from app.models.hub.curated_models import CURATED_MODELS, CuratedModel
from app.platform import units as fmt
from app.ui.models.flat_table import ListTableModel, row_table
from app.ui.models.verdicts import VERDICT_COLOURS, VerdictDelegate, budget_text, verdict_text

CHECKING = "checking…"


class RecommendedModel(ListTableModel[CuratedModel]):
    """The curated models (name, size, licence) and, once estimated, each one's verdict for
    the app's default KV mode at the context the fit was asked for, marked slow when it would
    decode under 5 tokens/s here (app/load/fit_speed.py; the speed is in the tooltip)."""

    HEADERS = ("Chat model", "Size", "Licence", "Fits here")

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._fits: dict[str, FitEstimate] = {}
        self._failed: dict[str, str] = {}
        self.measured_bandwidth: Bandwidth | None = None  # a real decode's, once there is one
        self.set_rows(CURATED_MODELS)

    def set_measured_bandwidth(self, bandwidth: Bandwidth | None) -> None:
        """Speeds rest on `bandwidth` from now on (ModelsPage sets it after a real decode)."""
        self.measured_bandwidth = bandwidth
        if self._rows:
            self.dataChanged.emit(self.index(0, 3), self.index(len(self._rows) - 1, 3))

    def speed_for(self, repo_id: str) -> SpeedEstimate | None:
        """The decode speed of the model's file here, in the default KV mode, if it loads."""
        estimate, fit = self._fits.get(repo_id), self.fit_for(repo_id)
        if estimate is None or fit is None or fit.verdict not in (FITS, TIGHT):
            return None
        bandwidth = bandwidth_for(estimate, self.measured_bandwidth)
        return estimate_speed(estimate.weights_bytes, fit.kv_bytes, bandwidth)

    def set_fits(self, fits: Mapping[str, FitEstimate | str]) -> None:
        """Verdicts by repo id: a FitEstimate, or the sentence saying why there is none."""
        for repo_id, fit in fits.items():
            if isinstance(fit, str):
                self._failed[repo_id] = fit
            else:
                self._fits[repo_id] = fit
        if self._rows:
            self.dataChanged.emit(self.index(0, 3), self.index(len(self._rows) - 1, 3))

    def fit_for(self, repo_id: str) -> ModeFit | None:
        fit = self._fits.get(repo_id)
        return fit.for_mode(DEFAULT_KV_MODE.label) if fit is not None else None

    def cell(self, row: int, col: int, role: int) -> object:
        model = self._rows[row]
        fit = self.fit_for(model.repo_id)
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 3:
                if fit is None:
                    return self._failed.get(model.repo_id, CHECKING)
                # A slow one says so; the speed of the others is in the tooltip (the list keeps
                # whole names at 1024 px).
                return verdict_text(fit, self.speed_for(model.repo_id))
            return (model.name, fmt.size(model.size_bytes), model.licence)[col]
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(model, col)
        if role == Qt.ItemDataRole.TextAlignmentRole and col == 1:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if (
            col == 3
            and fit is not None
            and role
            in (
                Qt.ItemDataRole.BackgroundRole,
                Qt.ItemDataRole.ForegroundRole,
            )
        ):
            background, foreground = VERDICT_COLOURS[fit.verdict]
            return QBrush(background if role == Qt.ItemDataRole.BackgroundRole else foreground)
        if role == Qt.ItemDataRole.UserRole:
            return model.repo_id
        return None

    def _tooltip(self, model: CuratedModel, col: int) -> str:
        estimate = self._fits.get(model.repo_id)
        fit = self.fit_for(model.repo_id)
        if col == 3 and estimate is not None and fit is not None:
            speed = self.speed_for(model.repo_id)
            return (
                f"KV {fit.mode.label} at {estimate.n_ctx:,} tokens: needs "
                f"{fmt.size(fit.total_bytes)} of {fmt.size(estimate.budget.bytes)} "
                f"{budget_text(estimate.budget)}."
            ) + (f"\n{speed_sentence(estimate, speed)}" if speed else "")
        if col == 2:
            return model.licence_name
        return (
            f"{model.repo_id}: {model.file} ({model.quantization}), {model.parameters} "
            f"parameters, by {model.maker}. Select it to see every file and its fit."
        )


def recommended_table(model: RecommendedModel) -> QTableView:
    table = row_table(model)
    table.setAlternatingRowColors(True)
    header = table.horizontalHeader()
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    for col in range(1, len(RecommendedModel.HEADERS)):
        header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
    table.setItemDelegateForColumn(3, VerdictDelegate(table))  # the fit in the look's shades
    return table
