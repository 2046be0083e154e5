"""The second half of the signature table: numerics, processes, launchers, code and files."""

from __future__ import annotations

import re

from stethoscope.diagnose.log_model import Signature, rx
from stethoscope.diagnose.parsers_device import parse_devices, parse_nccl_error, parse_shape
from stethoscope.diagnose.parsers_process import (
    parse_child_failed,
    parse_corrupt,
    parse_interrupt,
    parse_module,
    parse_port,
    parse_state_dict,
    parse_unused,
    parse_weights_only,
)


# -- the signature table ------------------------------------------------------------------------

_I = re.IGNORECASE
_RESUME = "resume from the last verified checkpoint"

PROCESS_SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "address_in_use", rx(r"Address already in use", r"EADDRINUSE", r"errno: 98\b",
                              r"server socket has failed to listen on any local network address"),
        "crash", "error", "Rendezvous port already in use (MASTER_PORT)",
        ("another job or a leftover process from an earlier run holds MASTER_PORT (29500 by default) on "
         "this node",),
        ("pick a free port: torchrun --master_port=PORT (e.g. derived from the job id), or "
         "--rdzv-endpoint=localhost:0 / --standalone on one node",
         "find and stop the stale process: ss -ltnp | grep PORT, or lsof -i :PORT"),
        parse_port),
    Signature(
        "rendezvous_timeout", rx(r"Timed out after \d+ seconds waiting for clients", r"RendezvousTimeoutError",
                                  r"client socket has timed out after", r"DistStoreError", r"connect\(\) timed out"),
        "crash", "error", "Distributed rendezvous timed out",
        ("not every node started, or they cannot reach MASTER_ADDR:MASTER_PORT (wrong address, firewall)",),
        ("check that all nodes launched with the same MASTER_ADDR/MASTER_PORT and world size",
         "test reachability from a worker: nc -zv MASTER_ADDR MASTER_PORT")),
    Signature(
        "duplicate_gpu", rx(r"Duplicate GPU detected"),
        "crash", "error", "Two ranks on the same GPU",
        ("the ranks did not select their own GPU: torch.cuda.set_device(LOCAL_RANK) missing",),
        ("call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before init_process_group",),
        supersedes=("nccl_error",)),
    Signature(
        "nccl_error", rx(r"NCCL error in:", r"ncclUnhandledCudaError", r"ncclSystemError", r"ncclInternalError",
                          r"ncclRemoteError", r"ncclInvalidUsage", r"NCCL communicator was aborted",
                          r"remote process exited or there was a network error"),
        "crash", "error", "NCCL error",
        ("see the error kinds: often a consequence of a failure on this or another rank",),
        ("find the first error on every rank; NCCL_DEBUG=INFO shows what NCCL was doing",),
        parse_nccl_error, role="symptom"),
    Signature(
        "ddp_unused_parameters", rx(r"Expected to have finished reduction in the prior iteration"),
        "crash", "error", "DDP: some parameters got no gradient",
        ("part of the model did not take part in the loss on this step (a branch not taken, frozen "
         "layers still registered, an unused head)",),
        ("DistributedDataParallel(..., find_unused_parameters=True), or make every parameter reach the loss",
         "TORCH_DISTRIBUTED_DEBUG=DETAIL names the parameters"),
        parse_unused),
    Signature(
        "no_grad", rx(r"element 0 of tensors does not require grad and does not have a grad_fn"),
        "crash", "error", "Loss has no gradient",
        ("every parameter is frozen (requires_grad=False) — with PEFT and gradient checkpointing the inputs "
         "need enable_input_require_grads()",
         "the loss was computed under torch.no_grad()/inference_mode or detached (.item(), .detach(), numpy)"),
        ("check sum(p.numel() for p in model.parameters() if p.requires_grad) > 0",
         "call model.enable_input_require_grads() with gradient checkpointing on a frozen base")),
    Signature(
        "inplace_autograd", rx(r"modified by an inplace operation", r"backward through the graph a second time"),
        "crash", "error", "Autograd graph error (in-place change or second backward)",
        ("a tensor needed for backward was changed in place (x += …, relu_(inplace=True)), or a graph is "
         "reused across steps (a tensor carried over without .detach())",),
        ("torch.autograd.set_detect_anomaly(True) names the forward op",
         "replace the in-place op by an out-of-place one; detach state carried across steps")),
    Signature(
        "device_mismatch", rx(r"Expected all tensors to be on the same device",
                               r"Input type \(.+?\) and weight type \(.+?\) should be the same"),
        "crash", "error", "Tensors on different devices",
        ("part of the model or the batch was not moved to the GPU (a buffer created in forward on CPU, a "
         "batch not sent .to(device), a layer added after model.to())",),
        ("move the batch with .to(device) and create new tensors with device=x.device",
         "call model.to(device) after the model is fully built"),
        parse_devices),
    Signature(
        "shape_mismatch", rx(r"mat1 and mat2 shapes cannot be multiplied", r"must match the size of tensor b",
                              r"shape '\[[^\]]*\]' is invalid for input of size"),
        "crash", "error", "Shape mismatch",
        ("the data or the config does not match the model (hidden size, sequence length, image size)",),
        ("print the shapes at the failing line and compare with the model config",),
        parse_shape),
    Signature(
        "state_dict_mismatch", rx(r"size mismatch for [\w.]+: copying a param", r"Missing key\(s\) in state_dict",
                                   r"Unexpected key\(s\) in state_dict"),
        "crash", "error", "Checkpoint does not match the model",
        ("the checkpoint was saved from a different configuration (vocab resized, other hidden size or "
         "number of layers) or a differently wrapped model",),
        ("build the model with the checkpoint's config; resize embeddings before loading if tokens were "
         "added",
         "load with strict=False only after checking which keys differ"),
        parse_state_dict),
    Signature(
        "checkpoint_corrupt", rx(r"PytorchStreamReader failed reading zip archive", r"failed finding central directory",
                                  r"invalid load key", r"unexpected EOF, expected \d+ more bytes",
                                  r"file might be corrupted", r"HeaderTooLarge", r"Error while deserializing header",
                                  r"incomplete metadata, file not fully covered", r"EOFError: Ran out of input"),
        "crash", "error", "Checkpoint file truncated or corrupt",
        ("the save was interrupted (job killed, disk full) and left a partial file",
         "an incomplete download or copy"),
        ("compare the file size/hash with what was written (a manifest); fall back to the previous checkpoint",
         "save atomically: write to a temporary name, fsync, then rename",
         "check free disk space where checkpoints are written"),
        parse_corrupt),
    Signature(
        "weights_only_load", rx(r"Weights only load failed", r"WeightsUnpickler error"),
        "crash", "error", "torch.load refused the checkpoint (weights_only)",
        ("since PyTorch 2.6 torch.load defaults to weights_only=True and the file pickles Python objects "
         "(argparse.Namespace, numpy scalars, custom classes) besides tensors",),
        ("save plain state dicts (tensors, numbers, strings) instead of pickled objects",
         "for files you trust: allowlist the named globals with torch.serialization.add_safe_globals or the "
         "safe_globals context manager",
         "weights_only=False only for checkpoints you created yourself: it can run arbitrary code"),
        parse_weights_only),
    Signature(
        "module_not_found", rx(r"ModuleNotFoundError", r"ImportError: cannot import name"),
        "crash", "error", "Missing Python module",
        ("the package is not installed in the environment the job actually runs in (compute nodes use "
         "another Python, the venv was not activated in the job script)",
         "a local module is not on the path (run as python -m package.module from the project root)"),
        ("print sys.executable in the job to see which Python runs",),
        parse_module),
    Signature(
        "native_abi", rx(r"undefined symbol: \S+", r"cannot open shared object file"),
        "crash", "error", "Compiled extension or CUDA library mismatch",
        ("a compiled extension (flash-attn, apex, bitsandbytes, xformers) was built against another "
         "torch/CUDA version, or a CUDA runtime library is missing",),
        ("reinstall the extension against the installed torch (pip install --no-build-isolation "
         "--force-reinstall PACKAGE)",
         "check versions: python -m torch.utils.collect_env")),
    Signature(
        "segfault", rx(r"Segmentation fault", r"\bSIGSEGV\b", r"exitcode\s*:\s*-11\b", r"signal 11\b"),
        "crash", "error", "Segmentation fault",
        ("a crash in native code: an extension built for another torch/CUDA, a DataLoader worker forked "
         "with threads (OpenCV, tokenizers), a driver bug",),
        ("rerun with python -X faulthandler (or PYTHONFAULTHANDLER=1) to get the Python stack",
         "rerun with num_workers=0 to see whether a DataLoader worker is the culprit",
         "rebuild/reinstall compiled extensions for the installed torch")),
    Signature(
        "compile_failed", rx(r"BackendCompilerFailed", r"torch\._dynamo\.exc\.\w+", r"InductorError"),
        "crash", "error", "torch.compile failed",
        ("a graph break or backend failure in torch.compile for this model/version",),
        ("run without torch.compile to confirm; TORCH_LOGS=graph_breaks,recompiles shows where it fails",
         "wrap the failing region with torch.compiler.disable, or upgrade torch")),
    Signature(
        "faulthandler_timeout", rx(r"^Timeout \(\d+:\d{2}:\d{2}\)!"),
        "hang", "error", "No progress before the faulthandler timeout (hang)",
        ("the process made no progress for the configured timeout: a collective waiting on another rank, "
         "a DataLoader deadlock, slow I/O",),
        ("read the thread stacks dumped right after this line: the main thread's innermost frame is where "
         "it waited",)),
    Signature(
        # Not torchrun's "Signal 15 (SIGTERM) received by PID": that is how it stops the other workers
        # after one failed; SignalException is torchrun itself receiving the signal.
        "interrupted", rx(r"^KeyboardInterrupt", r"received SIGTERM", r"SignalException: Process \d+ got signal",
                           r"CANCELLED AT .* DUE TO"),
        "crash", "warning", "Run stopped by a signal (interrupt, time limit, preemption)",
        ("the job was stopped from outside: Ctrl-C, the scheduler's time limit or a preemption",),
        ("save a checkpoint when SIGTERM arrives (a handler sets a flag; the loop saves at the next step)",
         "request a signal before the limit (sbatch --signal=USR1@120) and requeue",
         _RESUME),
        parse_interrupt),
    Signature(
        "cuda_error", rx(r"CUDA error: [\w ]+", r"cudaError\w+"),
        "crash", "error", "CUDA error",
        ("a CUDA call failed; CUDA errors are reported asynchronously, so the line in the traceback may not "
         "be the op that failed",),
        ("rerun with CUDA_LAUNCH_BLOCKING=1 to get the real failing op",)),
    Signature(
        "child_failed", rx(r"ChildFailedError", r"elastic\.multiprocessing\.api:failed \(exitcode"),
        "crash", "error", "A training process failed (torchrun)",
        ("torchrun only reports that a child process died: the real error is in that rank's own output",),
        ("read the traceback of the rank named as root cause (run with --tee 3 / --log-dir to keep each "
         "rank's output)",),
        parse_child_failed, role="wrapper"),
)
