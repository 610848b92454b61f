"""Shared fixtures of the Python module's tests (docs/python.md): the build's tools, the shared
traces (tests needing them skip with a message when absent), a generated store."""
import os
import subprocess

import pytest

SRC = os.environ.get("KERNALYSE_SRC", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("KERNALYSE_BIN", os.path.join(SRC, "build", "bin"))
TRACES = os.environ.get("KERNALYSE_SHARED_TRACES", os.path.join(SRC, "..", "shared", "traces"))


def tool(name):
    return os.path.join(BIN, name)


def merge(*args, check=True):
    """kernalyse-merge ARGS: (exit code, stdout, stderr)."""
    p = subprocess.run([tool("kernalyse-merge"), *map(str, args)], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"kernalyse-merge {args}: exit {p.returncode}: {p.stderr}")
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="session")
def traces():
    if not os.path.isdir(TRACES):
        pytest.skip(f"{TRACES} absent (shared traces not available)")
    return TRACES


@pytest.fixture(scope="session")
def gen(tmp_path_factory):
    """A generated 4-rank job (kernalyse-tracegen: Kineto files with steps and NCCL
    collectives) and its store, made by kernalyse-merge."""
    d = tmp_path_factory.mktemp("gen")
    subprocess.run([tool("kernalyse-tracegen"), "--ranks", "4", "--kernels", "300", "--steps", "3",
                    "--seed", "5", "--out", str(d / "traces")], check=True, capture_output=True)
    merge(d / "traces", "-o", d / "run.h5", "-q")
    return d
