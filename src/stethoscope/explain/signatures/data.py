"""Data loading: DataLoader workers killed, out of shared memory, or exiting unexpectedly."""

from __future__ import annotations

from stethoscope.explain.model import Signature, rx
from stethoscope.findings.catalogue import CRASH, MEMORY_PRESSURE


# -- signatures ---------------------------------------------------------------------------------

DATALOADER_KILLED = Signature(
    "dataloader_killed", rx(r"DataLoader worker \(pid \d+\) is killed by signal: Killed"),
    MEMORY_PRESSURE, "error", "DataLoader worker killed (host out of memory)",
    ("the host ran out of RAM and the kernel's OOM killer chose a DataLoader worker: too many workers, "
     "large prefetch queues, or a dataset object whose Python lists are copied into every worker",),
    ("use fewer workers (num_workers) and a smaller prefetch_factor",
     "keep dataset indices in numpy arrays or memory-mapped files, not Python lists/dicts (copy-on-read "
     "duplicates them in every worker)",
     "check host memory: dmesg | grep -i 'killed process', free -g during training"),
    supersedes=("dataloader_exited", "host_oom"))


SHM_EXHAUSTED = Signature(
    "shm_exhausted", rx(r"killed by signal: Bus error", r"insufficient shared memory \(shm\)",
                         r"out of shared memory"),
    MEMORY_PRESSURE, "error", "Shared memory (/dev/shm) exhausted by DataLoader workers",
    ("DataLoader workers hand batches over through /dev/shm, which is small in containers (64 MB by "
     "default in Docker)",),
    ("give the container more shared memory: docker run --shm-size=16g or --ipc=host",
     "use fewer workers or smaller batches per worker",
     "torch.multiprocessing.set_sharing_strategy('file_system')"),
    supersedes=("dataloader_exited",))


DATALOADER_EXITED = Signature(
    "dataloader_exited", rx(r"DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly"),
    CRASH, "error", "DataLoader worker exited unexpectedly",
    ("a worker died: out of host memory, out of shared memory, or a crash in native code in the "
     "dataset (image/audio decoders)",),
    ("rerun with num_workers=0 to see the real error in the main process",
     "check dmesg for the OOM killer and df -h /dev/shm"))
