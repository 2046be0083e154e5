"""What `stethoscope explain` knows: one Signature per failure, kept as data, grouped by failure domain.

Each record holds the regexes that recognise a failure, its finding type and severity, ranked causes
and fixes, and an optional parser that pulls the numbers out of the matching lines (OOM sizes, NCCL
sequence numbers, Xid codes, exit codes, …). A domain module holds its signatures and their parsers;
the engine that applies them is `explain.engine`.

Roles: a `root` failure is a cause; a `symptom` (an NCCL timeout, a remote NCCL error) usually follows
another rank's failure; a `wrapper` (torchrun's ChildFailedError) only reports that a child died.
`supersedes` names less specific signatures that the same lines also match.
"""

from __future__ import annotations

from stethoscope.explain.model import Signature
from stethoscope.explain.signatures import (
    collectives,
    data,
    device,
    launcher,
    memory,
    numerics,
    python,
    storage,
)

__all__ = ["SIGNATURES"]

# Order matters: signatures are matched, and their findings listed before ranking, in this order, so
# among findings of equal role, severity and line the earlier signature comes first.
SIGNATURES: tuple[Signature, ...] = (
    device.GPU_HARDWARE,
    memory.CUDA_OOM,
    collectives.NCCL_TIMEOUT,
    collectives.NCCL_BOOTSTRAP,
    collectives.NCCL_NVLS,
    device.DEVICE_ASSERT_INDEX,
    device.DEVICE_ASSERT_LABEL,
    device.DEVICE_ASSERT_BCE,
    device.DEVICE_ASSERT,
    device.ILLEGAL_MEMORY_ACCESS,
    device.CUDNN_CUBLAS,
    device.CUDA_SETUP,
    numerics.FP16_LOSS_SCALE_MIN,
    numerics.NAN_LOSS,
    numerics.FP16_OVERFLOW,
    data.DATALOADER_KILLED,
    data.SHM_EXHAUSTED,
    memory.HOST_OOM,
    data.DATALOADER_EXITED,
    storage.DISK_FULL,
    launcher.ADDRESS_IN_USE,
    launcher.RENDEZVOUS_TIMEOUT,
    collectives.DUPLICATE_GPU,
    collectives.NCCL_ERROR,
    collectives.DDP_UNUSED_PARAMETERS,
    python.NO_GRAD,
    python.INPLACE_AUTOGRAD,
    python.DEVICE_MISMATCH,
    python.SHAPE_MISMATCH,
    storage.STATE_DICT_MISMATCH,
    storage.CHECKPOINT_CORRUPT,
    storage.WEIGHTS_ONLY_LOAD,
    python.MODULE_NOT_FOUND,
    python.NATIVE_ABI,
    launcher.SEGFAULT,
    python.COMPILE_FAILED,
    launcher.FAULTHANDLER_TIMEOUT,
    launcher.INTERRUPTED,
    device.CUDA_ERROR,
    launcher.CHILD_FAILED,
)
