"""The Server page: the local OpenAI-compatible server on the app's engine. Start / Stop,
address, port, key, the base URL and a curl example to copy, and a live request log.

API requests wait their turn with the chat's replies (app.services.server_gateway); the
request log shows each one's tokens and speed as the engine measured them.
"""

from __future__ import annotations

import secrets
import shlex
import time

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.platform.errors import BadInputError
from app.server.options import DEFAULT_PORT, LOOPBACK, ServerOptions
from app.server.request_log import RequestRecord
from app.services.local_server import LocalServerService

COLUMNS = ("Time", "Client", "Request", "Status", "Prompt + reply", "Tokens/s", "Result")
LOG_ROWS = 200  # the newest requests kept in the table
ALL_INTERFACES = "0.0.0.0"


class ServerPage(QWidget):
    def __init__(self, service: LocalServerService, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.service = service
        form = self._build_form()
        start_row = self._build_start_row()
        url_row = self._build_url_row()
        self._build_log()
        self._lay_out(form, start_row, url_row)
        self.start_button.clicked.connect(self._on_start_clicked)
        self.new_key_button.clicked.connect(self._on_new_key_clicked)
        self.copy_url_button.clicked.connect(lambda: _copy(self.base_url.text()))
        self.copy_example_button.clicked.connect(lambda: _copy(self.example.toPlainText()))
        service.started.connect(self._on_service_started)
        service.stopped.connect(self._on_service_stopped)
        service.request_logged.connect(self._on_service_request_logged)
        self._show_running(None)

    # ---- building ----------------------------------------------------------------------

    def _build_form(self) -> QFormLayout:
        """Address, port, API key and the prompt-logging switch."""
        self.address = QComboBox()
        self.address.setEditable(True)
        self.address.addItems([LOOPBACK, ALL_INTERFACES])
        self.address.setToolTip(
            f"{LOOPBACK}: this computer only. Any other address lets other machines in, and "
            "needs an API key."
        )
        self.port = QSpinBox()
        self.port.setRange(0, 65535)
        self.port.setSpecialValueText("any free port")  # 0: the system picks one
        self.port.setValue(DEFAULT_PORT)
        self.key = QLineEdit()
        self.key.setPlaceholderText("none (only for 127.0.0.1)")
        self.key.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
        self.new_key_button = QPushButton("New key")
        key_row = QHBoxLayout()
        key_row.addWidget(self.key)
        key_row.addWidget(self.new_key_button)
        key_row.addStretch(1)
        self.log_prompts = QCheckBox("Show the start of each prompt in the log")
        # kvstudio serve --allow-chat-on-base-model: off, a chat to a base model is a 400
        # pointing to /v1/completions (app.server.api)
        self.allow_chat_on_base_model = QCheckBox("Allow chat on a base model")
        self.allow_chat_on_base_model.setToolTip(
            "A base model (such as the starter) continues text rather than answering. Off, "
            "chat requests to one are refused with a pointer to /v1/completions; on, they are "
            "answered with a plain chat template, rambling as that may be."
        )
        for field, width in ((self.address, 220), (self.port, 140)):
            field.setMaximumWidth(width)
        self.key.setMinimumWidth(320)
        form = QFormLayout()
        form.addRow("Address", self.address)
        form.addRow("Port", self.port)
        form.addRow("API key", key_row)
        form.addRow("", self.log_prompts)
        form.addRow("", self.allow_chat_on_base_model)
        return form

    def _build_start_row(self) -> QHBoxLayout:
        self.start_button = QPushButton("Start server")
        self.start_button.setObjectName("primaryButton")
        self.state = QLabel("Stopped")
        self.state.setTextFormat(Qt.TextFormat.PlainText)
        self.state.setWordWrap(True)
        start_row = QHBoxLayout()
        start_row.addWidget(self.start_button)
        start_row.addWidget(self.state, 1)
        return start_row

    def _build_url_row(self) -> QHBoxLayout:
        """The base URL to copy; the curl example under it is built here too."""
        self.base_url = QLineEdit()
        self.base_url.setReadOnly(True)
        self.copy_url_button = QPushButton("Copy")
        url_row = QHBoxLayout()
        url_row.addWidget(QLabel("Base URL"))
        url_row.addWidget(self.base_url, 1)
        url_row.addWidget(self.copy_url_button)
        self.example = QPlainTextEdit()
        self.example.setReadOnly(True)
        self.example.setMaximumHeight(72)
        self.copy_example_button = QPushButton("Copy curl example")
        return url_row

    def _build_log(self) -> None:
        """The request log: the newest LOG_ROWS requests, newest first."""
        self.log = QTableWidget(0, len(COLUMNS))
        self.log.setHorizontalHeaderLabels(COLUMNS)
        self.log.verticalHeader().setVisible(False)
        self.log.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.log.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        header = self.log.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)

    def _lay_out(self, form: QFormLayout, start_row: QHBoxLayout, url_row: QHBoxLayout) -> None:
        title = QLabel("Local server")
        title.setObjectName("pageTitle")
        title.setStyleSheet("font-size: 18px; font-weight: 600;")
        intro = QLabel(
            "Other programs (editors, agents, scripts) can use the model loaded in the chat "
            "through an OpenAI-compatible API. Their requests wait their turn with the chat's."
        )
        intro.setObjectName("hint")
        intro.setWordWrap(True)
        log_title = QLabel("Requests")
        log_title.setObjectName("panelTitle")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 16, 16, 16)
        layout.addWidget(title)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addLayout(start_row)
        layout.addLayout(url_row)
        layout.addWidget(self.example)
        layout.addWidget(self.copy_example_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(log_title)
        layout.addWidget(self.log, 1)

    # ---- the server ----------------------------------------------------------------------

    def options(self) -> ServerOptions:
        return ServerOptions(
            host=self.address.currentText().strip(),
            port=self.port.value(),
            api_key=self.key.text().strip(),
            log_prompts=self.log_prompts.isChecked(),
            allow_chat_on_base_model=self.allow_chat_on_base_model.isChecked(),
        )

    def start(self) -> bool:
        """Start with what the page shows; a refusal is shown in one sentence."""
        try:
            self.service.start(self.options())
        except BadInputError as error:
            self.state.setText(str(error))
            self.state.setStyleSheet("color: #b91c1c;")
            return False
        return True

    def _on_start_clicked(self) -> None:
        if self.service.running:
            self.service.stop()
        else:
            self.start()

    def _on_new_key_clicked(self) -> None:
        self.key.setText(f"kvs-{secrets.token_urlsafe(24)}")

    def _on_service_started(self, base_url: str) -> None:
        self._show_running(base_url)

    def _on_service_stopped(self) -> None:
        self._show_running(None)

    def _show_running(self, base_url: str | None) -> None:
        running = base_url is not None
        switches = (self.log_prompts, self.allow_chat_on_base_model)
        for field in (self.address, self.port, self.key, self.new_key_button, *switches):
            field.setEnabled(not running)
        self.start_button.setText("Stop server" if running else "Start server")
        self.state.setStyleSheet("")
        self.state.setText(f"Running at {base_url}" if running else "Stopped")
        shown = base_url or self.options().base_url
        self.base_url.setText(shown)
        self.example.setPlainText(curl_example(shown, bool(self.key.text().strip())))

    def _on_service_request_logged(self, record: RequestRecord) -> None:
        if self.log.rowCount() >= LOG_ROWS:
            self.log.removeRow(self.log.rowCount() - 1)
        self.log.insertRow(0)  # newest first
        tokens = (
            f"{record.prompt_tokens} + {record.completion_tokens}" if record.status == 200 else ""
        )
        speed = f"{record.tokens_per_second:.1f}" if record.tokens_per_second else ""
        result = record.error or record.finish_reason
        if record.prompt:
            result = f"{result}: {record.prompt}"
        cells = (
            time.strftime("%H:%M:%S", time.localtime(record.at)),
            record.client,
            f"{record.method} {record.path}",
            str(record.status),
            tokens,
            speed,
            result,
        )
        for column, text in enumerate(cells):
            item = QTableWidgetItem(text)  # plain text: a prompt is shown as typed
            if column in (3, 4, 5):
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.log.setItem(0, column, item)


def curl_example(base_url: str, with_key: bool) -> str:
    key = ' -H "Authorization: Bearer $KVSTUDIO_API_KEY"' if with_key else ""
    body = '{"model": "loaded", "messages": [{"role": "user", "content": "Hello!"}]}'
    return (
        f"curl {base_url}/chat/completions{key} \\\n"
        f'  -H "Content-Type: application/json" \\\n'
        f"  -d {shlex.quote(body)}"
    )


def _copy(text: str) -> None:
    clipboard = QGuiApplication.clipboard()
    if clipboard is not None:
        clipboard.setText(text)
