"""Causes a detector names from its evidence, as data: where a hung main thread waits (the watchdog's
stack, detect/hang.py) with the fix of each, and the markers of what the records before a NaN show
(detect/nonfinite.py). `remedies.py` turns them into the advice that answers those causes.
"""

from __future__ import annotations

# Where a hung main thread waits: (the cause the watchdog names, its fix).
STUCK_IN: dict[str, tuple[str, str]] = {
    "collective": ("the main thread waits in a collective for a rank that has not arrived (a rank died, is stuck "
                   "or took another code path)",
                   "find the rank that is not in the collective (`stethoscope probe --all RUN backtrace`, or "
                   "py-spy dump on each rank); set the process-group timeout so a hang fails fast"),
    "data_loader": ("the main thread waits for the next batch: a DataLoader worker is stuck or dead, or its "
                    "storage stalls",
                    "py-spy dump the main process and its workers; retry with num_workers=0 to confirm; check the "
                    "storage the dataset reads"),
    "file_io": ("the main thread waits on file I/O (a checkpoint save or load, a slow or full file system)",
                "check the file system (free space, latency); save checkpoints asynchronously or less often"),
    "gc": ("the main thread is in a long garbage collection",
           "gc.freeze() after setup, then gc.disable() and a gc.collect() every N steps"),
    "compile": ("the main thread is compiling (torch.compile recompiling, often for new shapes)",
                "TORCH_LOGS=recompiles shows why; pad to fixed shapes or mark the dynamic dimensions"),
    "device_sync": ("the main thread waits for the device in a host sync (a kernel or a device-side collective "
                    "that does not finish)",
                    "py-spy dump for the call; rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; nvidia-smi "
                    "for a stuck GPU"),
    "user_code": ("the main thread is busy or blocked in the training script's own code (a sleep, a lock, a loop "
                  "that does not end, a call to a slow service)",
                  "read the line this names (`stethoscope probe RUN backtrace` while it hangs, py-spy dump --locals "
                  "for values) and make that call finish or time out"),
}

# What the records before a NaN show: markers the causes detect/nonfinite.py names contain.
NAN_SUDDEN = "not an LR overshoot"  # the LR held and the level kept up to it: a value that entered at once
NAN_LR_ROSE = "the LR rose"
NAN_GREW = "grew before the first non-finite"
