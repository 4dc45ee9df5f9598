"""Parallelism applied to the model, one function per strategy, in the order torchtitan applies it.

Checked against PyTorch v2.13 (this repository's pin; the GPU paths are unverified until a GPU runs them):
- DDP: torch/nn/parallel/distributed.py, `DistributedDataParallel(module, bucket_cap_mb=...)`; its Reducer
  all-reduces each bucket as soon as its gradients are ready, asynchronously on both gloo and NCCL.
- ZeRO-1: torch/distributed/optim/zero_redundancy_optimizer.py, `ZeroRedundancyOptimizer(params,
  optimizer_class=AdamW)`: parameters are assigned whole to ranks (a greedy partition by size), each rank keeps
  Adam's state for its own and, after its step, broadcasts them from their owner to everyone.
- FSDP2: torch/distributed/fsdp/_fully_shard/_fully_shard.py `fully_shard(module, reshard_after_forward=...)`:
  each block is one unit (one all-gather, one reduce-scatter), the root unit holds the embeddings, final norm
  and head, and every unit, root included, gets the strategy's `reshard_after_forward`. Parameters become DTensors sharded on dim 0 (padded to a multiple of N). FSDP2's own prefetch in
  _fsdp_param_group.py (`unshard_async_op = False`) issues the next unit's all-gather synchronously and relies
  on a separate CUDA stream to overlap it; on gloo/CPU that would block the rank's only thread. So the lab
  prefetches explicitly with the public `FSDPModule.unshard(async_op=True)`: block i+1's all-gather is
  issued when block i's forward starts, block i-1's when block i's backward starts; FSDP2 then waits for it
  in that unit's pre-forward/pre-backward (`_fsdp_param_group.py`: `unshard` returns at once when an all-gather
  is already pending). Reduce-scatters stay as FSDP2 issues them (blocking on gloo).
"""

from __future__ import annotations

import torch


def apply(strategy: str, model, params, device: torch.device):
    """(the model to call, its optimizer) for `strategy`; the model's weights are the same for every strategy."""
    model = model.to(device)
    adamw = dict(lr=params.lr, betas=(0.9, 0.95), weight_decay=0.0, foreach=False)
    if strategy in ("ddp", "zero1"):
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        ddp = DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=params.ddp_bucket_mb)
        if strategy == "ddp":
            return ddp, torch.optim.AdamW(ddp.parameters(), **adamw)
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return ddp, ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW, **adamw)
    from torch.distributed.fsdp import fully_shard

    reshard = strategy == "fsdp2"
    for block in model.blocks:
        fully_shard(block, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    _prefetch_async(model.blocks)
    return model, torch.optim.AdamW(model.parameters(), **adamw)


def _prefetch_async(blocks) -> None:
    """Issue the neighbouring block's all-gather before this block's work (see the module docstring)."""
    n = len(blocks)

    def before_forward(i):
        def hook(_module, _args):
            if i + 1 < n:
                blocks[i + 1].unshard(async_op=True)

        return hook

    def after_forward(i):
        # A hook on the block's output runs when its gradient arrives: the start of this block's backward.
        # prepend=True puts it ahead of FSDP2's own pre-backward hook, so the prefetch is issued first.
        def hook(_module, _args, out):
            if not (isinstance(out, torch.Tensor) and out.requires_grad):
                return None

            def on_grad(grad):
                if i == n - 1:
                    blocks[i].unshard(async_op=True)  # the first block backward reaches: nobody prefetched it
                if i - 1 >= 0:
                    blocks[i - 1].unshard(async_op=True)
                return grad

            out.register_hook(on_grad)
            return None

        return hook

    for i, block in enumerate(blocks):
        block.register_forward_pre_hook(before_forward(i))
        block.register_forward_hook(after_forward(i), prepend=True)
