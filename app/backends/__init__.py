"""llama.cpp backends: the installed packages and their manifests, installing one, and
which GPU this machine has."""
