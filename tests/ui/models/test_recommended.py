"""Discover's Recommended list (small chat models, fit-checked here, no network until one is
opened) and the "Chat models only" filter on search."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.models.hub.curated_models import CURATED_MODELS
from app.platform import units as fmt
from app.ui.models.recommended import CHECKING
from tests.ui.models.page_driver import GIB, REPO, WAIT, make_page, shut


def _rows(page) -> list[list[str]]:
    model = page.search_view.recommended
    return [
        [model.index(r, c).data() for c in range(model.columnCount())]
        for r in range(model.rowCount())
    ]


def _wait_verdicts(qtbot, page) -> None:
    qtbot.waitUntil(lambda: all(row[3] != CHECKING for row in _rows(page)), timeout=WAIT)


def test_recommended_chat_models_show_size_licence_and_fit_before_any_request(qtbot, env, hub):
    page = make_page(qtbot, env, budget=2 * GIB)
    view = page.search_view
    # At the start, with the box empty: the list, not an empty table.
    assert view.recommended_table.isVisible() and not view.table.isVisible()
    _wait_verdicts(qtbot, page)
    rows = {row[0]: row for row in _rows(page)}
    assert len(rows) == len(CURATED_MODELS) >= 6
    qwen = rows["Qwen2.5 0.5B"]
    assert qwen[1:3] == [fmt.size(491_400_032), "Apache-2.0"]
    assert rows["Llama 3.2 1B"][2] == "Llama 3.2"
    # 2 GiB free: a 0.5B model fits, a 3.8B one (2.2 GiB of weights) does not.
    assert qwen[3].startswith("fits · max ")
    assert rows["Phi-3.5 mini"][3].startswith("does not fit")
    assert hub.log == []  # names, sizes and verdicts came from the project, not the Hub

    # Opening one asks the Hub for that repo's files, and only then.
    hub.add_repo(
        "Qwen/Qwen2.5-0.5B-Instruct-GGUF",
        {"qwen2.5-0.5b-instruct-q4_k_m.gguf": b"GGUF" + bytes(200)},
    )
    row = next(r for r in range(len(rows)) if view.recommended.row_at(r).name.startswith("Qwen"))
    view.recommended_table.selectRow(row)
    qtbot.waitUntil(
        lambda: page.repo_view.entry_names() == ["qwen2.5-0.5b-instruct-q4_k_m.gguf"],
        timeout=WAIT,
    )
    assert page.repo_view.repo_id == "Qwen/Qwen2.5-0.5B-Instruct-GGUF"
    # The server logs a request after writing its body, so the page can show the listing first.
    assert hub.wait_idle()
    assert any("/tree/" in r.path for r in hub.log)
    shut(page)


def test_show_recommended_brings_the_list_back_from_another_tab(qtbot, env):
    page = make_page(qtbot, env)
    page.search("tiny")
    qtbot.waitUntil(lambda: page.search_view.results.rowCount() == 3, timeout=WAIT)
    page.tabs.setCurrentIndex(page.TAB_LIBRARY)

    page.show_recommended()  # what the chat page's "Find a chat model" calls
    assert page.tabs.currentIndex() == page.TAB_DISCOVER
    view = page.search_view
    assert view.recommended_table.isVisible() and not view.table.isVisible()
    assert view.status_label.text().startswith("Recommended: small chat models")
    # The Recommended button does the same after a search.
    page.search("tiny")
    qtbot.waitUntil(view.table.isVisible, timeout=WAIT)
    qtbot.mouseClick(view.recommended_button, Qt.MouseButton.LeftButton)
    assert view.recommended_table.isVisible()
    shut(page)


def test_chat_models_only_keeps_instruct_and_conversational_repos(qtbot, env, hub):
    hub.add_repo("acme/tiny-chat-Instruct-GGUF", {"tiny-Q8_0.gguf": b"GGUF" + bytes(10)})
    hub.add_repo("zeta/tiny-gemma-it-GGUF", {"tiny-it-Q8_0.gguf": b"GGUF" + bytes(11)})
    hub.add_repo(
        "acme/tiny-talker-GGUF",
        {"talker-Q8_0.gguf": b"GGUF" + bytes(12)},
        tags=("gguf", "conversational", "text-generation"),
        pipeline_tag="text-generation",
    )
    page = make_page(qtbot, env)
    view = page.search_view
    page.search("tiny")
    qtbot.waitUntil(lambda: view.results.rowCount() == 6, timeout=WAIT)
    assert REPO in [r.repo_id for r in view.results.rows()]  # a base model, among the rest

    view.chat_only_box.setChecked(True)  # searches again at once
    qtbot.waitUntil(lambda: view.results.rowCount() == 3, timeout=WAIT)
    assert sorted(r.repo_id for r in view.results.rows()) == [
        "acme/tiny-chat-Instruct-GGUF",
        "acme/tiny-talker-GGUF",
        "zeta/tiny-gemma-it-GGUF",
    ]
    assert view.status_label.text() == "3 chat models found."
    shut(page)
