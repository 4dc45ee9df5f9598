"""Parallel building blocks shared by the multi-rank labs."""
