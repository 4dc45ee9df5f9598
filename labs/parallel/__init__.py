"""Parallel building blocks shared by the multi-rank labs: the rank launcher (dist), Megatron-style
tensor-parallel mappings (tp), degree checks (dims, torch-free), the communication model the lessons share
(comm, torch-free) and the predicted-time cost model (costmodel)."""
