"""KV Studio: run GGUF models locally and see, measured, what an int8-K cache saves."""

__version__ = "0.1.0"
