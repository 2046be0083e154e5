"""The GPU and CUDA: hardware faults (ECC, Xid), device-side asserts, illegal accesses, cuDNN/cuBLAS, setup."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stethoscope.explain.model import RESUME, Detail, Hit, Line, Signature, first_group, rx
from stethoscope.findings.catalogue import CRASH


# -- parsers: GPU hardware ----------------------------------------------------------------------

_XID = re.compile(r"\bXid\b(?:\s*\([^)]*\))?\s*:?\s*(\d+)", re.IGNORECASE)
_PCI = re.compile(r"PCI:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)")
# NVIDIA Xid codes that mean the hardware (or its firmware) failed; the rest are usually software.
XID_MEANING = {
    13: "graphics engine exception (often an out-of-range access in a kernel)",
    31: "GPU memory page fault (illegal address in a kernel, or driver)",
    43: "GPU stopped processing (a kernel fault)",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement / row remapping event",
    64: "ECC page retirement / row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
}
HARDWARE_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
_ECC = re.compile(r"\bECC\b|fallen off the bus|GPU is lost")


def parse_gpu_fault(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    xids = sorted({int(m.group(1)) for h in hits if (m := _XID.search(h.line.text))})
    pci = sorted({m.group(1) for h in hits if (m := _PCI.search(h.line.text))})
    evidence: dict[str, Any] = {"hardware": True}
    if xids:
        evidence["xid"] = xids
        evidence["xid_meaning"] = {x: XID_MEANING.get(x, "see NVIDIA's Xid catalogue") for x in xids}
    if pci:
        evidence["pci_bus"] = pci
    if any(_ECC.search(h.line.text) for h in hits) or set(xids) & HARDWARE_XIDS:
        names = [XID_MEANING.get(x, f"Xid {x}") for x in xids] or ["uncorrectable ECC / lost GPU"]
        return Detail(evidence=evidence, summary="; ".join(names))
    evidence["hardware"] = False
    return Detail(evidence=evidence, severity="error",
                  summary="; ".join(f"Xid {x}: {XID_MEANING.get(x, 'unknown')}" for x in xids),
                  causes=("these Xid codes usually come from a faulting kernel (out-of-range access, "
                          "driver bug), not from broken hardware — unless they recur on one node",),
                  fixes=("rerun the failing step with CUDA_LAUNCH_BLOCKING=1 to find the kernel",))


# -- parsers: device-side asserts, cuDNN/cuBLAS -------------------------------------------------

_ASSERT = re.compile(r"([\w/.-]+\.cu):(\d+): (\w+): block: \[([\d,]+)\], thread: \[([\d,]+)\] "
                     r"Assertion `(.+?)` failed")
_SEQ_TOO_LONG = re.compile(r"sequence length is longer than the specified maximum sequence length for this "
                           r"model \((\d+) > (\d+)\)")


def parse_assert(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = first_group(hits, _ASSERT)
    evidence: dict[str, Any] = {}
    summary = ""
    if m:
        evidence.update(kernel_file=f"{m.group(1)}:{m.group(2)}", kernel=m.group(3), assertion=m.group(6))
        summary = f"`{m.group(6)}` in {m.group(3)}"
    causes: tuple[str, ...] = ()
    long_seq = next((s for line in lines if (s := _SEQ_TOO_LONG.search(line.text))), None)
    if long_seq:
        evidence.update(sequence_length=int(long_seq.group(1)), max_length=int(long_seq.group(2)))
        causes = (f"the tokenizer warned of a sequence of {long_seq.group(1)} tokens for a model that takes "
                  f"{long_seq.group(2)}: position ids run past the position-embedding table",)
    return Detail(evidence=evidence, summary=summary, causes=causes)


_STATUS = re.compile(r"(CUDNN_STATUS_\w+|CUBLAS_STATUS_\w+|Unable to find a valid cuDNN algorithm)")
_STATUS_CAUSE = {
    "NOT_INITIALIZED": "the library could not initialise: out of GPU memory at start-up, or a CUDA/"
                       "cuDNN/driver version mismatch",
    "ALLOC_FAILED": "out of GPU memory inside the library",
    "Unable to find": "usually out of GPU memory while benchmarking algorithms (cudnn.benchmark)",
    "EXECUTION_FAILED": "a kernel failed: often an earlier asynchronous error (out-of-range index, "
                        "NaN/huge inputs) surfacing here, or a driver/library bug",
    "INTERNAL_ERROR": "a library bug or bad input (non-contiguous tensors, NaN) or an earlier "
                      "asynchronous CUDA error surfacing here",
    "NOT_SUPPORTED": "this shape/dtype/layout combination has no kernel (very large batch, odd channel "
                     "count in fp16)",
    "INVALID_VALUE": "a shape or dtype the library rejects: mismatched or zero-sized dimensions",
    "BAD_PARAM": "a shape or dtype the library rejects: mismatched or zero-sized dimensions",
}


def parse_status(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    statuses = sorted({m.group(1) for h in hits if (m := _STATUS.search(h.line.text))})
    causes = tuple(dict.fromkeys(c for s in statuses for key, c in _STATUS_CAUSE.items() if key in s))
    return Detail(evidence={"status": statuses}, summary=", ".join(statuses), causes=causes)


# -- signatures ---------------------------------------------------------------------------------

GPU_HARDWARE = Signature(
    "gpu_hardware", rx(r"uncorrectable ECC error", r"cudaErrorECCUncorrectable", r"(?i:\bXid\b)(?:\s*\([^)]*\))?\s*:?\s*\d+",
                        r"fallen off the bus", r"GPU is lost", r"row remapp?ing failure",
                        r"double[- ]bit ECC"),
    CRASH, "critical", "GPU hardware failure",
    ("a faulty GPU (uncorrectable memory error, a GPU lost from the PCIe bus, an NVLink fault): nothing "
     "is wrong with the training itself",
     "power, cooling or PCIe seating problems on that node",),
    ("drain/cordon the node and resubmit excluding it (e.g. sbatch --exclude=NODE): the restarted job "
     "landing on the same GPU will crash again",
     f"{RESUME}; the steps just before the crash may have used corrupted memory",
     "check the GPU: nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT, `dcgmi diag -r 3`, dmesg for Xid",
     "reset the GPU or reboot the node, and open a hardware ticket if it recurs"),
    parse_gpu_fault, supersedes=("illegal_memory_access", "cuda_error", "nccl_error"))


DEVICE_ASSERT_INDEX = Signature(
    "device_assert_index", rx(r"srcIndex < srcSelectDimSize", r"index out of bounds\"?` failed",
                               r"-sizes\[i\] <= index && index < sizes\[i\]"),
    CRASH, "error", "CUDA device-side assert: index out of range (embedding/index lookup)",
    ("a token id ≥ the vocabulary size: tokenizer and model disagree (special/pad tokens added without "
     "resize_token_embeddings, a tokenizer from another model)",
     "positions beyond max_position_embeddings: sequences longer than the model supports",
     "negative ids (labels such as -100 or a pad id of -1 fed as input_ids)"),
    ("check the failing batch: assert 0 <= input_ids.min() and input_ids.max() < model.config.vocab_size",
     "after adding tokens call model.resize_token_embeddings(len(tokenizer))",
     "truncate to the model's maximum length (tokenizer(..., truncation=True, max_length=...))",
     "rerun with CUDA_LAUNCH_BLOCKING=1 (or on CPU) so the error points at the real line"),
    parse_assert, supersedes=("device_assert", "cuda_error"))


DEVICE_ASSERT_LABEL = Signature(
    "device_assert_label", rx(r"t >= 0 && t < n_classes", r"cur_target >= 0 && cur_target < n_classes",
                               r"target_val >= zero && target_val <= one"),
    CRASH, "error", "CUDA device-side assert: label out of range in the loss",
    ("a target label outside [0, num_classes): labels not remapped to 0..C-1, num_labels set too small, "
     "a padding label other than the loss's ignore_index (-100)",),
    ("check the batch: assert ((y >= 0) & (y < num_classes)) | (y == -100)",
     "set num_labels / the output size to the real number of classes",
     "rerun with CUDA_LAUNCH_BLOCKING=1 (or on CPU) so the error points at the real line"),
    parse_assert, supersedes=("device_assert", "cuda_error"))


DEVICE_ASSERT_BCE = Signature(
    "device_assert_bce", rx(r"input_val >= zero && input_val <= one"),
    CRASH, "error", "CUDA device-side assert: BCE input outside [0, 1]",
    ("binary_cross_entropy got values outside [0, 1]: raw logits without a sigmoid, or NaN activations",),
    ("use BCEWithLogitsLoss on raw logits (numerically stable, works under autocast)",
     "if the inputs are NaN, treat it as a NaN problem: lower the LR, check the data"),
    parse_assert, supersedes=("device_assert", "cuda_error"))


DEVICE_ASSERT = Signature(
    "device_assert", rx(r"device-side assert triggered", r"\.cu:\d+: \w+: block: \[[\d,]+\], thread"),
    CRASH, "error", "CUDA device-side assert",
    ("a bounds or value check inside a CUDA kernel failed (index, label or probability out of range); "
     "the Python line in the traceback is often wrong because CUDA errors arrive asynchronously",),
    ("rerun with CUDA_LAUNCH_BLOCKING=1 (or TORCH_USE_CUDA_DSA=1, or on CPU) to get the real failing op",
     "check index and label ranges of the failing batch"),
    parse_assert, supersedes=("cuda_error",))


ILLEGAL_MEMORY_ACCESS = Signature(
    "illegal_memory_access", rx(r"an illegal memory access was encountered", r"cudaErrorIllegalAddress",
                                 r"CUDA error: misaligned address", r"an illegal instruction was encountered"),
    CRASH, "error", "CUDA illegal memory access",
    ("an out-of-bounds access in a kernel: a custom/fused kernel (flash-attention, Triton, apex) or an "
     "index tensor with bad values",
     "an NCCL/NVLS or driver bug (H100/H800 systems), or a mismatched CUDA/extension build",
     "a faulty GPU, when it recurs on one node (look for Xid 13/31/43 in dmesg)"),
    ("rerun with CUDA_LAUNCH_BLOCKING=1 to find the failing op; compute-sanitizer for custom kernels",
     "if NCCL is in the stack: try NCCL_NVLS_ENABLE=0 and a newer NCCL",
     "rebuild compiled extensions against the installed torch/CUDA",
     "run the same step on another node to rule out the GPU"),
    supersedes=("cuda_error",))


CUDNN_CUBLAS = Signature(
    "cudnn_cublas", rx(r"CUDNN_STATUS_\w+", r"cuDNN error", r"Unable to find a valid cuDNN algorithm",
                        r"CUBLAS_STATUS_(?!ALLOC_FAILED)\w+"),
    CRASH, "error", "cuDNN/cuBLAS error",
    ("an earlier asynchronous CUDA error or out-of-memory surfacing inside the library",
     "a CUDA / cuDNN / driver version mismatch",),
    ("rerun with CUDA_LAUNCH_BLOCKING=1 to see the real failing op",
     "to isolate cuDNN, set torch.backends.cudnn.enabled = False (or cudnn.benchmark = False)",
     "check versions: python -m torch.utils.collect_env"),
    parse_status, supersedes=("cuda_error",))


CUDA_SETUP = Signature(
    "cuda_setup", rx(r"CUDA driver version is insufficient", r"NVIDIA driver on your system is too old",
                      r"no kernel image is available for execution on the device",
                      r"no CUDA-capable device is detected", r"Found no NVIDIA driver",
                      r"is not compatible with the current PyTorch installation",
                      r"invalid device ordinal"),
    CRASH, "error", "CUDA setup problem (driver, GPU architecture, visible devices)",
    ("the installed torch was built for a newer CUDA than the driver supports, or without kernels for "
     "this GPU's architecture (sm_XX)",
     "more processes than visible GPUs (--nproc_per_node larger than the GPU count, CUDA_VISIBLE_DEVICES "
     "too narrow), or no GPU visible at all in the container (missing --gpus)"),
    ("install a torch build that matches the driver/GPU (check nvidia-smi and "
     "torch.cuda.get_arch_list())",
     "set --nproc_per_node to the number of GPUs and check CUDA_VISIBLE_DEVICES",
     "run containers with --gpus all"),
    supersedes=("cuda_error",))


CUDA_ERROR = Signature(
    "cuda_error", rx(r"CUDA error: [\w ]+", r"cudaError\w+"),
    CRASH, "error", "CUDA error",
    ("a CUDA call failed; CUDA errors are reported asynchronously, so the line in the traceback may not "
     "be the op that failed",),
    ("rerun with CUDA_LAUNCH_BLOCKING=1 to get the real failing op",))
