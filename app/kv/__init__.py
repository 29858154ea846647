"""K/V cache types and modes, the exact KV cache arithmetic, and whether a model fits:
per device, per context."""
