"""tiercheck-capture: per-layer taps of a llama.cpp run as a tiercheck trace.

`python -m tiercheck_capture --help` (or the `tiercheck-capture` command) for the options;
`tiercheck_capture.trace_io` reads and writes trace files with numpy alone.
"""

__version__ = "0.1.0"
