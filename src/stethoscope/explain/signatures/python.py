"""The Python program: autograd misuse, devices and shapes that do not match, imports, extensions, torch.compile."""

from __future__ import annotations

import re
from collections.abc import Sequence

from stethoscope.explain.model import Detail, Hit, Line, Signature, first_group, rx
from stethoscope.findings.catalogue import CRASH


# -- parsers ------------------------------------------------------------------------------------

_MAT = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")
_BROADCAST = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at "
                        r"non-singleton dimension (\d+)")


def parse_shape(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = first_group(hits, _MAT)
    if m:
        rows, got, expected, out = (int(g) for g in m.groups())
        return Detail(evidence={"mat1": [rows, got], "mat2": [expected, out]},
                      summary=f"a Linear layer expects {expected} input features but got {got}",
                      causes=(f"the layer was built for in_features={expected} but the tensor reaching it has "
                              f"{got} features (hidden size / flatten size / concatenation changed)",))
    m = first_group(hits, _BROADCAST)
    if m:
        a, b, dim = (int(g) for g in m.groups())
        return Detail(evidence={"size_a": a, "size_b": b, "dim": dim},
                      summary=f"sizes {a} and {b} differ at dimension {dim}",
                      causes=("a sequence longer than the model's maximum (attention mask or position "
                              "embedding of a different length)",))
    return Detail()


_DEVICES = re.compile(r"found at least two devices, ([\w:]+) and ([\w:]+)")


def parse_devices(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = first_group(hits, _DEVICES)
    if not m:
        return Detail()
    return Detail(evidence={"devices": [m.group(1), m.group(2)]}, summary=f"{m.group(1)} and {m.group(2)}")


_MODULE = re.compile(r"No module named '([\w.]+)'")
_CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
PIP_NAMES = {"cv2": "opencv-python", "sklearn": "scikit-learn", "yaml": "pyyaml", "PIL": "pillow",
             "skimage": "scikit-image", "bs4": "beautifulsoup4", "attr": "attrs", "flash_attn": "flash-attn",
             "google.protobuf": "protobuf", "sentencepiece": "sentencepiece", "Crypto": "pycryptodome"}


def parse_module(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = first_group(hits, _MODULE)
    if m:
        name = m.group(1)
        top = name.split(".")[0]
        package = PIP_NAMES.get(name) or PIP_NAMES.get(top) or top.replace("_", "-")
        return Detail(evidence={"module": name, "package": package}, summary=f"no module named {name!r}",
                      fixes=(f"install it into the environment the job runs in: pip install {package}",))
    m = first_group(hits, _CANNOT_IMPORT)
    if m:
        return Detail(evidence={"name": m.group(1), "module": m.group(2)},
                      summary=f"cannot import {m.group(1)!r} from {m.group(2)!r}",
                      causes=(f"the installed {m.group(2).split('.')[0]} is older or newer than the code "
                              f"expects: {m.group(1)!r} moved or does not exist in that version",))
    return Detail()


# -- signatures ---------------------------------------------------------------------------------

NO_GRAD = Signature(
    "no_grad", rx(r"element 0 of tensors does not require grad and does not have a grad_fn"),
    CRASH, "error", "Loss has no gradient",
    ("every parameter is frozen (requires_grad=False) — with PEFT and gradient checkpointing the inputs "
     "need enable_input_require_grads()",
     "the loss was computed under torch.no_grad()/inference_mode or detached (.item(), .detach(), numpy)"),
    ("check sum(p.numel() for p in model.parameters() if p.requires_grad) > 0",
     "call model.enable_input_require_grads() with gradient checkpointing on a frozen base"))


INPLACE_AUTOGRAD = Signature(
    "inplace_autograd", rx(r"modified by an inplace operation", r"backward through the graph a second time"),
    CRASH, "error", "Autograd graph error (in-place change or second backward)",
    ("a tensor needed for backward was changed in place (x += …, relu_(inplace=True)), or a graph is "
     "reused across steps (a tensor carried over without .detach())",),
    ("torch.autograd.set_detect_anomaly(True) names the forward op",
     "replace the in-place op by an out-of-place one; detach state carried across steps"))


DEVICE_MISMATCH = Signature(
    "device_mismatch", rx(r"Expected all tensors to be on the same device",
                           r"Input type \(.+?\) and weight type \(.+?\) should be the same"),
    CRASH, "error", "Tensors on different devices",
    ("part of the model or the batch was not moved to the GPU (a buffer created in forward on CPU, a "
     "batch not sent .to(device), a layer added after model.to())",),
    ("move the batch with .to(device) and create new tensors with device=x.device",
     "call model.to(device) after the model is fully built"),
    parse_devices)


SHAPE_MISMATCH = Signature(
    "shape_mismatch", rx(r"mat1 and mat2 shapes cannot be multiplied", r"must match the size of tensor b",
                          r"shape '\[[^\]]*\]' is invalid for input of size"),
    CRASH, "error", "Shape mismatch",
    ("the data or the config does not match the model (hidden size, sequence length, image size)",),
    ("print the shapes at the failing line and compare with the model config",),
    parse_shape)


MODULE_NOT_FOUND = Signature(
    "module_not_found", rx(r"ModuleNotFoundError", r"ImportError: cannot import name"),
    CRASH, "error", "Missing Python module",
    ("the package is not installed in the environment the job actually runs in (compute nodes use "
     "another Python, the venv was not activated in the job script)",
     "a local module is not on the path (run as python -m package.module from the project root)"),
    ("print sys.executable in the job to see which Python runs",),
    parse_module)


NATIVE_ABI = Signature(
    "native_abi", rx(r"undefined symbol: \S+", r"cannot open shared object file"),
    CRASH, "error", "Compiled extension or CUDA library mismatch",
    ("a compiled extension (flash-attn, apex, bitsandbytes, xformers) was built against another "
     "torch/CUDA version, or a CUDA runtime library is missing",),
    ("reinstall the extension against the installed torch (pip install --no-build-isolation "
     "--force-reinstall PACKAGE)",
     "check versions: python -m torch.utils.collect_env"))


COMPILE_FAILED = Signature(
    "compile_failed", rx(r"BackendCompilerFailed", r"torch\._dynamo\.exc\.\w+", r"InductorError"),
    CRASH, "error", "torch.compile failed",
    ("a graph break or backend failure in torch.compile for this model/version",),
    ("run without torch.compile to confirm; TORCH_LOGS=graph_breaks,recompiles shows where it fails",
     "wrap the failing region with torch.compiler.disable, or upgrade torch"))
