"""overlap-trace: async all-gather, the overlap window, and a dependency that forbids it (see run.py)."""
