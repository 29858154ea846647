"""The words a load goes by, one per situation: "Load" for a model not loaded now, "Reload" for
the one that is; the load dialog's button, its advice, the refusal box's "... anyway" button
and the refusal's sentence all say the same word."""

from __future__ import annotations

# "{0}": the situation's word. In the load dialog the user presses its button, then the box's.
DIALOG_ADVICE = "lower the context length, or press {0} and choose {0} anyway"
# From the model picker, with no dialog open: the box's button alone.
LOAD_ANYWAY_ADVICE = "lower the context length in Load options, or choose {0} anyway"


def load_word(model_path: str, loaded_path: str | None) -> str:
    """What loading `model_path` is called: "Reload" when it is the model loaded now."""
    return "Reload" if loaded_path is not None and model_path == loaded_path else "Load"
