"""An inference server's shape (vLLM, SGLang): the main process forks its tensor-parallel workers
with multiprocessing and sets no RANK; only the workers touch the (emulated) device."""
import argparse
import multiprocessing
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emu_device  # noqa: E402


def worker(tp_rank, tp_size, ready, go):
    ready.wait()  # all workers started before any touches the device: start order is theirs
    go.acquire()
    dev = emu_device.Device(tp_rank)
    go.release()
    emu_device.train_steps(dev, tp_rank, tp_size)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tensor-parallel-size", type=int, default=2)
    a = ap.parse_args()
    n = a.tensor_parallel_size
    ready, go = multiprocessing.Barrier(n), multiprocessing.Lock()
    ps = [multiprocessing.Process(target=worker, args=(r, n, ready, go)) for r in range(n)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    sys.exit(max(p.exitcode for p in ps))
