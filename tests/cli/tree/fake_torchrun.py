"""Stands in for torchrun where PyTorch is absent: forks --nproc-per-node workers, each with the
environment torchrun gives (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID), runs `python SCRIPT ARGS` in each (or, with
--no-python, the command itself), waits for all and exits with the first failure."""
import os
import subprocess
import sys


def main(argv):
    nproc, no_python, node_rank, nnodes = 1, False, 0, 1
    i = 0
    while i < len(argv) and argv[i].startswith("--"):
        a = argv[i]
        if a == "--no-python":
            no_python = True
        elif a in ("--nproc-per-node", "--nproc_per_node"):
            i += 1
            nproc = int(argv[i])
        elif a == "--node-rank":
            i += 1
            node_rank = int(argv[i])
        elif a == "--nnodes":
            i += 1
            nnodes = int(argv[i])
        i += 1
    cmd = argv[i:] if no_python else [sys.executable, "-u"] + argv[i:]
    procs = []
    for local in range(nproc):
        env = dict(os.environ, RANK=str(node_rank * nproc + local), LOCAL_RANK=str(local),
                   WORLD_SIZE=str(nnodes * nproc), LOCAL_WORLD_SIZE=str(nproc),
                   GROUP_RANK=str(node_rank), MASTER_ADDR="127.0.0.1", MASTER_PORT="29500",
                   TORCHELASTIC_RUN_ID="fake")
        # torchrun starts each worker in its own session (start_new_session) as well.
        procs.append(subprocess.Popen(cmd, env=env, start_new_session=True))
    rc = 0
    for p in procs:
        r = p.wait()
        rc = rc or (r if r >= 0 else 128 - r)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
