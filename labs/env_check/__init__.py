"""env-check: the capability report as a lab job (the lab's first evidence item)."""
