#!/usr/bin/env python3
"""A small torchrun job for the process-tree path of kernalyse-run (bench/gpu/validate.sh, h):

  kernalyse-run -o run.h5 torchrun --standalone --nproc-per-node 2 torchrun_tp.py
  torchrun --standalone --nproc-per-node 2 --no-python kernalyse-run -o run.h5 python3 torchrun_tp.py

Each worker (rank from torchrun's RANK) runs bf16 matmuls on the GPU and all-reduces a result
with torch.distributed's gloo backend (two ranks share the machine's one GPU; NCCL refuses two
ranks on one device). A DataLoader with two worker processes that never touch the GPU stands for a
trainer's data loading: they must not become ranks. Prints one JSON line per rank."""
import json
import os

import torch
import torch.distributed as dist


class Numbers(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((256,), float(i))


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    w = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    loader = torch.utils.data.DataLoader(Numbers(), batch_size=16, num_workers=2)
    steps = 0
    for batch in loader:
        x = batch.to("cuda", dtype=torch.bfloat16).repeat(1, 4)  # 16 x 1024
        y = x @ w
        t = y.float().sum().reshape(1)
        dist.all_reduce(t)  # gloo: through the host
        steps += 1
    torch.cuda.synchronize()
    print(json.dumps({"rank": rank, "world": world, "steps": steps}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
