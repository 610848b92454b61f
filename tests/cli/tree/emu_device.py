"""The kernalyse emulated-device C API (aggregator/spool/include/kernalyse/emu.h) from Python, through
ctypes: what a PyTorch worker's GPU work looks like to the collector, without a GPU. The symbols
are found in the process (the collector is preloaded by kernalyse-run); without it, unprofiled."""
import ctypes
import os
import threading

I32, I64, U64, STR = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_char_p


class Activity(ctypes.Structure):
    _fields_ = [("kind", I32), ("device", I32), ("stream", I32), ("start_ns", I64),
                ("end_ns", I64), ("correlation", I64), ("name", STR)]


class Launch(ctypes.Structure):
    _fields_ = [("start_ns", I64), ("end_ns", I64), ("correlation", I64), ("thread", I64),
                ("name", STR)]


class Nccl(ctypes.Structure):
    _fields_ = [("correlation", I64), ("comm_hash", U64), ("collective", STR), ("seq", I64),
                ("count", I64), ("dtype", STR), ("bytes", I64), ("nranks", I32), ("peer", I32),
                ("algo", STR), ("proto", STR), ("n_channels", I32), ("comm_rank", I32)]


class CollMark(ctypes.Structure):
    _fields_ = [("ts_ns", I64), ("comm_hash", U64), ("seq", I64), ("collective", STR),
                ("bytes", I64), ("nranks", I32), ("comm_rank", I32), ("state", I32)]


class Device:
    """One emulated GPU of one worker: kernels and all-reduces recorded as CUPTI would."""

    def __init__(self, device):
        lib = ctypes.CDLL(None)
        try:
            self.now = lib.kernalyse_emu_now_ns
            self.activity = lib.kernalyse_emu_record_activity
            self.launch = lib.kernalyse_emu_record_launch
            self.nccl = lib.kernalyse_emu_record_nccl
            self.mark = lib.kernalyse_emu_record_coll_mark
            self.now.restype = I64
            self.profiled = True
        except AttributeError:
            self.profiled = False
        self.device = device
        self.corr = 0
        self.seq = 0

    def _launch(self, name, start):
        self.corr += 1
        end = self.now()
        self.launch(ctypes.byref(Launch(start, end, self.corr, threading.get_native_id(),
                                        name.encode())))
        return self.corr

    def kernel(self, name, ns):
        if not self.profiled:
            return
        corr = self._launch("cudaLaunchKernel", self.now())
        t = self.now()
        self.activity(ctypes.byref(Activity(0, self.device, 7, t, t + ns, corr, name.encode())))

    def all_reduce(self, comm_hash, nranks, comm_rank, count, ns):
        if not self.profiled:
            return
        corr = self._launch("ncclAllReduce", self.now())
        seq, self.seq = self.seq, self.seq + 1
        self.nccl(ctypes.byref(Nccl(corr, comm_hash, b"AllReduce", seq, count, b"BFloat16",
                                    2 * count, nranks, -1, b"RING", b"LL", -1, comm_rank)))
        t = self.now()
        self.mark(ctypes.byref(CollMark(t, comm_hash, seq, b"AllReduce", 2 * count, nranks,
                                        comm_rank, 0)))
        self.activity(ctypes.byref(Activity(
            0, self.device, 20, t, t + ns, corr,
            b"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)")))
        self.mark(ctypes.byref(CollMark(t + ns, comm_hash, seq, b"AllReduce", 2 * count, nranks,
                                        comm_rank, 1)))


def train_steps(dev, rank, world, steps=3):
    """A few steps of a tensor-parallel worker: GEMMs, then an all-reduce over all workers."""
    for _ in range(steps):
        dev.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 200000)
        dev.all_reduce(0x5EED0000 + world, world, rank, 1 << 20, 100000)


def env_int(name, default):
    v = os.environ.get(name)
    return int(v) if v is not None else default
