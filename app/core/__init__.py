"""Pure Python, no Qt: model files, KV arithmetic, probes, Hub, storage, settings."""
