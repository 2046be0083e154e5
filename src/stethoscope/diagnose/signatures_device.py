"""The first half of the signature table: GPU, memory, NCCL and device failures (see log_signatures)."""

from __future__ import annotations

import re

from stethoscope.diagnose.log_model import Signature, rx
from stethoscope.diagnose.parsers_device import (
    parse_assert,
    parse_gpu_fault,
    parse_nccl_timeout,
    parse_oom,
    parse_status,
)
from stethoscope.diagnose.parsers_process import parse_disk, parse_nan, parse_overflow


# -- the signature table ------------------------------------------------------------------------

_I = re.IGNORECASE
_RESUME = "resume from the last verified checkpoint"

DEVICE_SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "gpu_hardware", rx(r"uncorrectable ECC error", r"cudaErrorECCUncorrectable", r"(?i:\bXid\b)(?:\s*\([^)]*\))?\s*:?\s*\d+",
                            r"fallen off the bus", r"GPU is lost", r"row remapp?ing failure",
                            r"double[- ]bit ECC"),
        "crash", "critical", "GPU hardware failure",
        ("a faulty GPU (uncorrectable memory error, a GPU lost from the PCIe bus, an NVLink fault): nothing "
         "is wrong with the training itself",
         "power, cooling or PCIe seating problems on that node",),
        ("drain/cordon the node and resubmit excluding it (e.g. sbatch --exclude=NODE): the restarted job "
         "landing on the same GPU will crash again",
         f"{_RESUME}; the steps just before the crash may have used corrupted memory",
         "check the GPU: nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT, `dcgmi diag -r 3`, dmesg for Xid",
         "reset the GPU or reboot the node, and open a hardware ticket if it recurs"),
        parse_gpu_fault, supersedes=("illegal_memory_access", "cuda_error", "nccl_error")),
    Signature(
        "cuda_oom", rx(r"CUDA out of memory", r"OutOfMemoryError", r"HIP out of memory",
                        r"CUDA error: out of memory", r"CUBLAS_STATUS_ALLOC_FAILED",
                        r"RESOURCE_EXHAUSTED: Out of memory", r"MPS backend out of memory"),
        "memory_pressure", "error", "CUDA out of memory",
        ("activations of one micro-batch (batch size × sequence length) do not fit next to the weights, "
         "gradients and optimizer state",
         "model + gradients + optimizer state alone are too large (mixed-precision Adam needs ≈16 bytes "
         "per parameter before activations)",
         "memory grows step by step: tensors kept across steps (a loss history without .item(), a "
         "retained graph), or an unusually long batch late in the run"),
        ("halve the micro-batch and double gradient accumulation (same global batch)",
         "turn on activation checkpointing (gradient_checkpointing_enable() / torch.utils.checkpoint)",
         "train in bf16 mixed precision (torch.autocast(dtype=torch.bfloat16)) if you are in fp32",
         "shorten or cap the sequence length, pack sequences instead of padding",
         "shard parameters and optimizer state (FSDP, DeepSpeed ZeRO-2/3) or use an 8-bit optimizer",
         "see what holds memory: torch.cuda.memory._record_memory_history() and a memory snapshot"),
        parse_oom, supersedes=("cuda_error", "cudnn_cublas")),
    Signature(
        "nccl_timeout", rx(r"Watchdog caught collective operation timeout", r"watchdog got stuck for",
                            r"Heartbeat monitor timed out", r"Timeout at NCCL work"),
        "hang", "critical", "NCCL collective timed out (hang)",
        ("another rank crashed, hung or fell far behind (data loading, checkpoint I/O, evaluation on one "
         "rank only) and never joined the collective — this timeout is usually the symptom",
         "ranks called different collectives (a collective inside `if rank == 0`, uneven batches per "
         "rank, an early break)",
         "a network, NVLink or GPU fault on one node (check dmesg for Xid errors)",
         "a legitimately long operation inside a collective exceeded the timeout (first-step compile, a "
         "large checkpoint save)"),
        ("find the earliest error in every rank's log: that rank is the cause",
         "rerun with TORCH_NCCL_DESYNC_DEBUG=1, TORCH_DISTRIBUTED_DEBUG=DETAIL and NCCL_DEBUG=INFO to see "
         "which rank is behind; TORCH_NCCL_DUMP_ON_TIMEOUT=1 dumps the flight recorder",
         "dump the stuck ranks' stacks with py-spy dump --pid PID before the job is torn down",
         "give every rank the same number of batches (drop_last=True) and keep collectives out of "
         "rank-conditional code",
         f"{_RESUME}; if it recurs on the same node, drain that node"),
        parse_nccl_timeout, role="symptom"),
    Signature(
        "nccl_bootstrap", rx(r"Bootstrap\s*:\s*no socket interface found", r"no NCCL_SOCKET_IFNAME interface",
                              r"is neither AF_INET\(2\) nor AF_INET6", r"NET/Socket : No usable listening interface",
                              r"ncclSocketInit.*failed"),
        "crash", "error", "NCCL could not set up its network (bootstrap)",
        ("no usable network interface: NCCL_SOCKET_IFNAME names an interface that does not exist on this "
         "node, or the container only has the loopback interface",
         "the nodes reach each other on a different interface than NCCL picked (docker/veth bridges, "
         "IPv4 vs IPv6)"),
        ("list interfaces with `ip -br addr` and set NCCL_SOCKET_IFNAME to the one that reaches the other "
         "nodes (e.g. NCCL_SOCKET_IFNAME=eth0, or exclude bridges with ^docker0,lo)",
         "in a container, run with --network=host (and --ipc=host)",
         "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET shows which interfaces NCCL considered",
         "check that MASTER_ADDR resolves to that interface; force IPv4 with NCCL_SOCKET_FAMILY=AF_INET"),
        supersedes=("nccl_error",)),
    Signature(
        "nccl_nvls", rx(r"transport/nvls\.cc:\d+ NCCL WARN", r"NVLS\b.*(?:fail|error)"),
        "crash", "error", "NCCL NVLink SHARP (NVLS) failure",
        ("NVLS multicast is not working on this system: fabric manager down or mismatched with the driver, "
         "or an NCCL NVLS bug",),
        ("set NCCL_NVLS_ENABLE=0 (and NCCL_ALGO=^NVLS) to bypass NVLS",
         "check the fabric manager: systemctl status nvidia-fabricmanager, nvidia-smi -q | grep -i fabric; "
         "its version must match the driver",
         "update NCCL; report with NCCL_DEBUG=INFO logs if it persists"),
        supersedes=("nccl_error", "illegal_memory_access")),
    Signature(
        "device_assert_index", rx(r"srcIndex < srcSelectDimSize", r"index out of bounds\"?` failed",
                                   r"-sizes\[i\] <= index && index < sizes\[i\]"),
        "crash", "error", "CUDA device-side assert: index out of range (embedding/index lookup)",
        ("a token id ≥ the vocabulary size: tokenizer and model disagree (special/pad tokens added without "
         "resize_token_embeddings, a tokenizer from another model)",
         "positions beyond max_position_embeddings: sequences longer than the model supports",
         "negative ids (labels such as -100 or a pad id of -1 fed as input_ids)"),
        ("check the failing batch: assert 0 <= input_ids.min() and input_ids.max() < model.config.vocab_size",
         "after adding tokens call model.resize_token_embeddings(len(tokenizer))",
         "truncate to the model's maximum length (tokenizer(..., truncation=True, max_length=...))",
         "rerun with CUDA_LAUNCH_BLOCKING=1 (or on CPU) so the error points at the real line"),
        parse_assert, supersedes=("device_assert", "cuda_error")),
    Signature(
        "device_assert_label", rx(r"t >= 0 && t < n_classes", r"cur_target >= 0 && cur_target < n_classes",
                                   r"target_val >= zero && target_val <= one"),
        "crash", "error", "CUDA device-side assert: label out of range in the loss",
        ("a target label outside [0, num_classes): labels not remapped to 0..C-1, num_labels set too small, "
         "a padding label other than the loss's ignore_index (-100)",),
        ("check the batch: assert ((y >= 0) & (y < num_classes)) | (y == -100)",
         "set num_labels / the output size to the real number of classes",
         "rerun with CUDA_LAUNCH_BLOCKING=1 (or on CPU) so the error points at the real line"),
        parse_assert, supersedes=("device_assert", "cuda_error")),
    Signature(
        "device_assert_bce", rx(r"input_val >= zero && input_val <= one"),
        "crash", "error", "CUDA device-side assert: BCE input outside [0, 1]",
        ("binary_cross_entropy got values outside [0, 1]: raw logits without a sigmoid, or NaN activations",),
        ("use BCEWithLogitsLoss on raw logits (numerically stable, works under autocast)",
         "if the inputs are NaN, treat it as a NaN problem: lower the LR, check the data"),
        parse_assert, supersedes=("device_assert", "cuda_error")),
    Signature(
        "device_assert", rx(r"device-side assert triggered", r"\.cu:\d+: \w+: block: \[[\d,]+\], thread"),
        "crash", "error", "CUDA device-side assert",
        ("a bounds or value check inside a CUDA kernel failed (index, label or probability out of range); "
         "the Python line in the traceback is often wrong because CUDA errors arrive asynchronously",),
        ("rerun with CUDA_LAUNCH_BLOCKING=1 (or TORCH_USE_CUDA_DSA=1, or on CPU) to get the real failing op",
         "check index and label ranges of the failing batch"),
        parse_assert, supersedes=("cuda_error",)),
    Signature(
        "illegal_memory_access", rx(r"an illegal memory access was encountered", r"cudaErrorIllegalAddress",
                                     r"CUDA error: misaligned address", r"an illegal instruction was encountered"),
        "crash", "error", "CUDA illegal memory access",
        ("an out-of-bounds access in a kernel: a custom/fused kernel (flash-attention, Triton, apex) or an "
         "index tensor with bad values",
         "an NCCL/NVLS or driver bug (H100/H800 systems), or a mismatched CUDA/extension build",
         "a faulty GPU, when it recurs on one node (look for Xid 13/31/43 in dmesg)"),
        ("rerun with CUDA_LAUNCH_BLOCKING=1 to find the failing op; compute-sanitizer for custom kernels",
         "if NCCL is in the stack: try NCCL_NVLS_ENABLE=0 and a newer NCCL",
         "rebuild compiled extensions against the installed torch/CUDA",
         "run the same step on another node to rule out the GPU"),
        supersedes=("cuda_error",)),
    Signature(
        "cudnn_cublas", rx(r"CUDNN_STATUS_\w+", r"cuDNN error", r"Unable to find a valid cuDNN algorithm",
                            r"CUBLAS_STATUS_(?!ALLOC_FAILED)\w+"),
        "crash", "error", "cuDNN/cuBLAS error",
        ("an earlier asynchronous CUDA error or out-of-memory surfacing inside the library",
         "a CUDA / cuDNN / driver version mismatch",),
        ("rerun with CUDA_LAUNCH_BLOCKING=1 to see the real failing op",
         "to isolate cuDNN, set torch.backends.cudnn.enabled = False (or cudnn.benchmark = False)",
         "check versions: python -m torch.utils.collect_env"),
        parse_status, supersedes=("cuda_error",)),
    Signature(
        "cuda_setup", rx(r"CUDA driver version is insufficient", r"NVIDIA driver on your system is too old",
                          r"no kernel image is available for execution on the device",
                          r"no CUDA-capable device is detected", r"Found no NVIDIA driver",
                          r"is not compatible with the current PyTorch installation",
                          r"invalid device ordinal"),
        "crash", "error", "CUDA setup problem (driver, GPU architecture, visible devices)",
        ("the installed torch was built for a newer CUDA than the driver supports, or without kernels for "
         "this GPU's architecture (sm_XX)",
         "more processes than visible GPUs (--nproc_per_node larger than the GPU count, CUDA_VISIBLE_DEVICES "
         "too narrow), or no GPU visible at all in the container (missing --gpus)"),
        ("install a torch build that matches the driver/GPU (check nvidia-smi and "
         "torch.cuda.get_arch_list())",
         "set --nproc_per_node to the number of GPUs and check CUDA_VISIBLE_DEVICES",
         "run containers with --gpus all"),
        supersedes=("cuda_error",)),
    Signature(
        "fp16_loss_scale_min", rx(r"Current loss scale already at minimum", r"Minimum loss scale reached",
                                   r"loss scale .*(?:reached|below) (?:the )?minimum", flags=_I),
        "loss_scale_collapse", "critical", "fp16 loss scale collapsed to its minimum: the run aborted",
        ("gradients overflow on every step: the loss diverged (LR too high, no warm-up) or fp16 cannot hold "
         "the activations",),
        ("train in bf16 instead of fp16 where the hardware supports it",
         "lower the learning rate or lengthen warm-up; clip gradients",
         f"{_RESUME} from before the overflows started and skip the batches around it")),
    Signature(
        "nan_loss", rx(r"(?<![A-Za-z])loss\b['\"]?\s*(?:is|became|was|=|:)?\s*['\"]?(?:nan|-?inf)\b",
                        r"(?<![A-Za-z])grad[_ ]?norm\b['\"]?\s*(?:is|=|:)?\s*(?:nan|-?inf)\b",
                        r"Detected (?:NaN|nan|inf|non-finite) (?:values? in )?loss", r"non-finite loss",
                        r"returned nan values in its \d+\w* output", r"NaN or Inf found in input tensor",
                        flags=_I),
        "nan", "critical", "Loss or gradients became NaN/Inf",
        ("learning rate too high or warm-up too short (the loss usually spikes first)",
         "fp16 overflow: activations or gradients beyond 65504",
         "a bad batch: empty sequences or all labels masked (0/0 in the mean), corrupt samples",
         "log/sqrt/division of zero in a custom loss"),
        ("find the first non-finite step and the batch it used; rerun that step under "
         "torch.autograd.detect_anomaly() to name the op",
         "clip gradients (clip_grad_norm_ 1.0), lower the LR or lengthen warm-up",
         "use bf16 instead of fp16",
         f"{_RESUME} before the NaN and skip the offending batches"),
        parse_nan),
    Signature(
        "fp16_overflow", rx(r"OVERFLOW! Rank \d+ Skipping step", r"Gradient overflow\.\s+Skipping step",
                             r"overflow detected, setting loss scale to"),
        "loss_scale_collapse", "warning", "fp16 gradient overflow, steps skipped",
        ("occasional overflows are how dynamic loss scaling works; many in a row, or the scale falling low, "
         "mean the gradients are blowing up",),
        ("nothing to do for a few overflows at the start; if the scale keeps falling, lower the LR and "
         "clip gradients, or switch to bf16",),
        parse_overflow),
    Signature(
        "dataloader_killed", rx(r"DataLoader worker \(pid \d+\) is killed by signal: Killed"),
        "memory_pressure", "error", "DataLoader worker killed (host out of memory)",
        ("the host ran out of RAM and the kernel's OOM killer chose a DataLoader worker: too many workers, "
         "large prefetch queues, or a dataset object whose Python lists are copied into every worker",),
        ("use fewer workers (num_workers) and a smaller prefetch_factor",
         "keep dataset indices in numpy arrays or memory-mapped files, not Python lists/dicts (copy-on-read "
         "duplicates them in every worker)",
         "check host memory: dmesg | grep -i 'killed process', free -g during training"),
        supersedes=("dataloader_exited", "host_oom")),
    Signature(
        "shm_exhausted", rx(r"killed by signal: Bus error", r"insufficient shared memory \(shm\)",
                             r"out of shared memory"),
        "memory_pressure", "error", "Shared memory (/dev/shm) exhausted by DataLoader workers",
        ("DataLoader workers hand batches over through /dev/shm, which is small in containers (64 MB by "
         "default in Docker)",),
        ("give the container more shared memory: docker run --shm-size=16g or --ipc=host",
         "use fewer workers or smaller batches per worker",
         "torch.multiprocessing.set_sharing_strategy('file_system')"),
        supersedes=("dataloader_exited",)),
    Signature(
        "host_oom", rx(r"Signal 9 \(SIGKILL\) received", r"exitcode\s*:\s*-9\b", r"Out of memory: Kill(?:ed)? process",
                        r"oom[-_]kill(?:er)? event", r"return code = -9\b", r"Signals\.SIGKILL", r"^Killed\s*$",
                        r"exit code 137\b"),
        "memory_pressure", "error", "Process killed with SIGKILL (host out of memory)",
        ("the host ran out of RAM and the kernel's OOM killer (or the scheduler's memory limit) killed the "
         "process: loading a full checkpoint or dataset into RAM on every rank, too many DataLoader workers",
         "someone or something sent kill -9 (a scheduler enforcing a limit)"),
        ("confirm with dmesg | grep -i 'killed process' or the scheduler's job record (sacct -j JOB -o "
         "MaxRSS,State)",
         "load checkpoints with mmap=True / map_location='cpu' on one rank at a time; stream the dataset",
         "use fewer DataLoader workers; request more memory from the scheduler")),
    Signature(
        "dataloader_exited", rx(r"DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly"),
        "crash", "error", "DataLoader worker exited unexpectedly",
        ("a worker died: out of host memory, out of shared memory, or a crash in native code in the "
         "dataset (image/audio decoders)",),
        ("rerun with num_workers=0 to see the real error in the main process",
         "check dmesg for the OOM killer and df -h /dev/shm")),
    Signature(
        "disk_full", rx(r"No space left on device", r"\[Errno 28\]", r"Disk quota exceeded", r"\[Errno 122\]"),
        "crash", "error", "Disk full",
        ("checkpoints accumulating without retention, or caches (HF datasets/hub, TMPDIR, torch compile) on "
         "a small filesystem",),
        ("free space and keep only the last N checkpoints",
         "verify the last checkpoint is complete before resuming: a save interrupted by a full disk is "
         "truncated",
         "move caches to a large filesystem (HF_HOME, TMPDIR)"),
        parse_disk),
)
