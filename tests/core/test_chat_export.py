"""Conversations exported as Markdown and JSON from a real store: what the file holds."""

from __future__ import annotations

import json
from pathlib import Path

from app.chats.export import conversation_json, conversation_markdown, write_export
from app.chats.records import DONE, STREAMING
from app.chats.store import ChatStore

CODE = "```python\ndef f():\n\treturn 1\n```"


def _conversation(store: ChatStore) -> int:
    conversation = store.create_conversation(
        "Python help", system_prompt="Be brief.", sampling={"temperature": 0.3}
    )
    store.add_message(conversation.id, "user", "Write a function")
    reply = store.add_message(conversation.id, "assistant", "", STREAMING, model="/m/tiny.gguf")
    store.finish_message(reply.id, "First try", DONE, generated_tokens=2)
    store.start_new_version(reply.id, "/m/other.gguf")
    store.finish_message(reply.id, f"Here:\n\n{CODE}", DONE, generated_tokens=9)
    return conversation.id


def test_json_has_the_messages_in_order_with_role_text_model_and_time(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "chat.sqlite3")
    cid = _conversation(store)
    data = json.loads(
        conversation_json(store.conversation(cid), store.messages(cid), store.reply_versions)
    )
    assert data["format"] == "kvstudio-conversation" and data["title"] == "Python help"
    assert data["system_prompt"] == "Be brief." and data["sampling"] == {"temperature": 0.3}
    user, reply = data["messages"]
    assert (user["role"], user["text"], user["model"]) == ("user", "Write a function", None)
    assert (reply["role"], reply["text"], reply["model"]) == (
        "assistant",
        f"Here:\n\n{CODE}",
        "/m/other.gguf",
    )
    assert user["time"] <= reply["time"] and "T" in user["time"]  # ISO 8601, in order
    assert (reply["version"], reply["versions"]) == (2, 2)
    assert [v["text"] for v in reply["all_versions"]] == ["First try", f"Here:\n\n{CODE}"]
    assert set(data) == {
        "format",
        "format_version",
        "title",
        "created_at",
        "updated_at",
        "system_prompt",
        "sampling",
        "messages",
    }  # nothing else: no settings, no token
    store.close()


def test_markdown_keeps_the_replies_markdown_and_names_who_wrote_what(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "chat.sqlite3")
    cid = _conversation(store)
    text = conversation_markdown(store.conversation(cid), store.messages(cid))
    assert text.startswith("# Python help\n")
    assert "## System prompt\n\nBe brief." in text
    assert "## You\n" in text and "Write a function" in text
    assert "## Assistant (other), version 2 of 2\n" in text
    assert CODE in text  # the code block as the model wrote it, tab included
    assert text.index("Write a function") < text.index(CODE)
    path = tmp_path / "out.md"
    write_export(path, text)
    assert path.read_text(encoding="utf-8") == text
    store.close()
