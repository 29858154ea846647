"""Qt objects without widgets: engine client, downloads, memory sampler, message bridge."""
