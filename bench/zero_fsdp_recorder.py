"""What zero-fsdp's CollectiveRecorder costs a training step on the CPU: the same steps with and without it.

    .venv/bin/python bench/zero_fsdp_recorder.py                  the lab's default model, 20 steps each
    .venv/bin/python bench/zero_fsdp_recorder.py --hidden 512 --layers 4 --steps 10

The lab times every op a rank runs through a TorchDispatchMode (labs/zero_fsdp/measure.py), so its CPU step
times include that mode's Python per op. This runs the lab's model and optimizer in one process (one thread, as a
rank has), alternating plain and recorded steps so load from other processes falls on both alike, and prints the
median step of each and their ratio: the factor by which the lab's CPU step times overstate an unrecorded step.
Nothing here is asserted; the ratio is the result.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F

    from labs.zero_fsdp import model
    from labs.zero_fsdp.measure import CollectiveRecorder
    from labs.zero_fsdp.params import Params

    torch.set_num_threads(1)  # a rank's share (labs/parallel/dist.py)
    params = Params(hidden=args.hidden, layers=args.layers)
    net = model.build(params, params.seed)
    opt = torch.optim.AdamW(net.parameters(), lr=params.lr, foreach=False)
    tokens = model.batch_for(params, 0)
    inp, target = tokens[:, :-1], tokens[:, 1:]

    def step() -> None:
        loss = F.cross_entropy(net(inp).reshape(-1, params.vocab), target.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # warm-up: first-call costs and Adam's state
    plain, recorded, ops = [], [], 0
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        plain.append(time.perf_counter() - t0)
        rec = CollectiveRecorder(time_ops=True)
        t0 = time.perf_counter()
        with rec:
            step()
        recorded.append(time.perf_counter() - t0)
        ops = len(rec.ops)
    a, b = statistics.median(plain), statistics.median(recorded)
    print(f"model: hidden {args.hidden}, layers {args.layers}; {ops} ops per step")
    print(f"plain step    {a * 1e3:8.2f} ms (median of {args.steps})")
    print(f"recorded step {b * 1e3:8.2f} ms")
    print(f"ratio recorded/plain {b / a:.2f}  ({(b - a) / max(ops, 1) * 1e6:.1f} µs per op)")


if __name__ == "__main__":
    main()
