"""Stop strings cut the reply and never leak a partial match to the screen."""

from __future__ import annotations

from app.engine.generation import StopFilter


def test_text_is_held_back_while_it_may_start_a_stop_string():
    f = StopFilter(["<end_of_turn>"])
    assert f.push("Hello <end") == "Hello "
    assert f.push("_of") == ""
    assert f.push("_turn> more") == ""
    assert f.stopped and f.flush() == ""


def test_a_false_start_is_released():
    f = StopFilter(["###"])
    assert f.push("a #") == "a "
    assert f.push("b") == "#b"
    assert not f.stopped
    assert f.push("##") == ""
    assert f.flush() == "##"


def test_earliest_stop_wins_and_no_stops_pass_through():
    f = StopFilter(["World", "lo"])
    assert f.push("Hello World") == "Hel"
    assert StopFilter([]).push("anything") == "anything"
