"""Model files: reading and checking a GGUF header, the Hub client and downloads, the
library on disk, the starter model."""
