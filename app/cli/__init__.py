"""Processes started from the command line: `python -m app` (commands), the serving supervisor (serve) and
what runs once before serving (startup)."""
