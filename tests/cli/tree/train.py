"""A torchrun-style worker (rank from RANK/WORLD_SIZE, as torch.distributed reads them) on the
emulated device. Like a real trainer it also starts a data-loader process that never touches the
device: it must not become a rank."""
import multiprocessing
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emu_device  # noqa: E402


def loader(q):
    q.put(sum(range(1000)))  # CPU only


if __name__ == "__main__":
    rank, world = emu_device.env_int("RANK", 0), emu_device.env_int("WORLD_SIZE", 1)
    q = multiprocessing.Queue()
    p = multiprocessing.Process(target=loader, args=(q,))
    p.start()
    subprocess.run(["true"], check=True)  # a compiler-like subprocess: nothing either
    dev = emu_device.Device(emu_device.env_int("LOCAL_RANK", 0))
    emu_device.train_steps(dev, rank, world)
    q.get()
    p.join()
    print(f"train.py: rank {rank} of {world} done (profiled: {dev.profiled})")
