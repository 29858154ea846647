"""safe_text: what a file's author wrote, shown without its control characters or its length."""

from __future__ import annotations

from app.platform.safe_text import safe_stream, safe_text


def test_escape_sequences_and_c1_controls_are_made_visible_not_run():
    shown = safe_text("a\x1b]0;title\x07b\x1b[2Jc\x9bd\x7f")
    assert shown == "a?]0;title?b?[2Jc?d?"


def test_bidi_overrides_cannot_reverse_what_follows():
    assert safe_text("file\u202egnp.exe\u2066x\u2069") == "file?gnp.exe?x?"


def test_long_text_is_cut_with_an_ellipsis_and_lines_joined():
    assert safe_text("N" * 300_000, 10) == "N" * 9 + "…"
    assert safe_text("one\ntwo\r\tthree") == "one two  three"
    assert safe_text("one\ntwo", keep_newlines=True) == "one\ntwo"


def test_markup_stays_as_the_literal_words():
    # HTML is only dangerous to widgets that read it: they are set to plain text (app/ui).
    assert safe_text("<b>bold</b><img src=x>") == "<b>bold</b><img src=x>"


def test_a_streamed_reply_keeps_its_lines_and_tabs_and_drops_every_escape():
    pieces = ["a\x1b", "[2Jb\tc\n", "\u202ed\x9b1m\r\x07e"]
    shown = "".join(safe_stream(p) for p in pieces)
    assert shown == "a[2Jb\tc\nd1me" == safe_stream("".join(pieces))
