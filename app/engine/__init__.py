"""The engine process: owns the one llama_cpp.Llama. No Qt."""
