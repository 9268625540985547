//! GGUF reader and writer (in progress).
