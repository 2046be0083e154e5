"""`explain_text`: crash logs and tracebacks → named failures. Every snippet here was written for
these tests in the shape the real tools print; none is copied from a real log."""

from __future__ import annotations

import textwrap

import pytest

from stethoscope.explain import explain_text
from stethoscope.explain.signatures import SIGNATURES
from stethoscope.explain.signatures.memory import is_fragmented
from stethoscope.findings.catalogue import FINDING_TYPES
from stethoscope.records import SEVERITIES, Finding
from tests.conftest import realruns_dir

REALRUNS = realruns_dir()


def log(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def only(findings: list[Finding], signature: str) -> Finding:
    matching = [f for f in findings if f.evidence.get("signature") == signature]
    assert len(matching) == 1, [f.evidence.get("signature") for f in findings]
    return matching[0]


def signatures(findings: list[Finding]) -> list[str]:
    return [f.evidence["signature"] for f in findings]


# -- the table itself ---------------------------------------------------------------------------


def test_signature_table_is_consistent() -> None:
    ids = [s.id for s in SIGNATURES]
    assert len(ids) == len(set(ids))
    for sig in SIGNATURES:
        assert sig.type in FINDING_TYPES, sig.id
        assert sig.severity in SEVERITIES, sig.id
        assert sig.role in ("root", "symptom", "wrapper"), sig.id
        assert sig.causes and sig.fixes, sig.id
        assert set(sig.supersedes) <= set(ids), sig.id


def test_empty_and_healthy_text_give_nothing() -> None:
    assert explain_text("") == []
    healthy = "\n".join(f"iter {i}: loss {3.0 - i / 1000:.4f}, time 120.3ms, mfu 41.2%" for i in range(500))
    assert explain_text(healthy) == []


# One short line per signature, in the shape the tool prints it; a new signature needs a new line here.
ONE_LINERS = {
    "gpu_hardware": "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "cuda_oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB.",
    "nccl_timeout": "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=BROADCAST, "
                    "Timeout(ms)=600000) ran for 600100 milliseconds before timing out.",
    "nccl_bootstrap": "gpu1:77:77 [0] NCCL WARN Bootstrap : no socket interface found",
    "nccl_nvls": "gpu1:77:90 [0] transport/nvls.cc:598 NCCL WARN Cuda failure 1 'invalid argument'",
    "device_assert_index": "Indexing.cu:1422: indexSelectSmallIndex: block: [0,0,0], thread: [3,0,0] "
                           "Assertion `srcIndex < srcSelectDimSize` failed.",
    "device_assert_label": "Loss.cu:242: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [9,0,0] "
                           "Assertion `t >= 0 && t < n_classes` failed.",
    "device_assert_bce": "Loss.cu:92: operator(): block: [0,0,0], thread: [1,0,0] Assertion "
                         "`input_val >= zero && input_val <= one` failed.",
    "device_assert": "RuntimeError: CUDA error: device-side assert triggered",
    "illegal_memory_access": "RuntimeError: CUDA error: an illegal memory access was encountered",
    "cudnn_cublas": "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle)`",
    "cuda_setup": "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
    "fp16_loss_scale_min": "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding.",
    "nan_loss": "iter 3010: loss nan, time 312.55ms, mfu 31.02%",
    "fp16_overflow": "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0",
    "dataloader_killed": "RuntimeError: DataLoader worker (pid 901) is killed by signal: Killed.",
    "shm_exhausted": "RuntimeError: DataLoader worker (pid 902) is killed by signal: Bus error.",
    "host_oom": "slurmstepd: error: Detected 1 oom_kill event in StepId=4411.0. Some of the step tasks have been OOM Killed.",
    "dataloader_exited": "RuntimeError: DataLoader worker (pid(s) 903, 904) exited unexpectedly",
    "disk_full": "OSError: [Errno 122] Disk quota exceeded",
    "address_in_use": "OSError: [Errno 98] Address already in use",
    "rendezvous_timeout": "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
    "duplicate_gpu": "Duplicate GPU detected : rank 3 and rank 2 both on CUDA device 41000",
    "nccl_error": "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1333, unhandled system "
                  "error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3",
    "ddp_unused_parameters": "RuntimeError: Expected to have finished reduction in the prior iteration before "
                             "starting a new one.",
    "no_grad": "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn",
    "inplace_autograd": "RuntimeError: Trying to backward through the graph a second time",
    "device_mismatch": "RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) "
                       "should be the same",
    "shape_mismatch": "RuntimeError: shape '[8, -1, 64]' is invalid for input of size 1000",
    "state_dict_mismatch": 'RuntimeError: Unexpected key(s) in state_dict: "_orig_mod.wte.weight".',
    "checkpoint_corrupt": "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
    "weights_only_load": "_pickle.UnpicklingError: Weights only load failed. Re-running `torch.load` with "
                         "`weights_only` set to `False` will likely succeed",
    "module_not_found": "ImportError: cannot import name 'LlamaFlashAttention2' from 'transformers.models.llama'",
    "native_abi": "OSError: libcudart.so.12: cannot open shared object file: No such file or directory",
    "segfault": "Segmentation fault (core dumped)",
    "compile_failed": "torch._dynamo.exc.Unsupported: call_function UserDefinedObjectVariable",
    "faulthandler_timeout": "Timeout (0:05:00)!",
    "interrupted": "KeyboardInterrupt",
    "cuda_error": "RuntimeError: CUDA error: unspecified launch failure",
    "child_failed": "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
}


def test_every_signature_has_a_one_liner() -> None:
    assert set(ONE_LINERS) == {s.id for s in SIGNATURES}


@pytest.mark.parametrize("signature", sorted(ONE_LINERS))
def test_one_liner_names_its_signature(signature: str) -> None:
    findings = explain_text(ONE_LINERS[signature])
    assert signatures(findings)[0] == signature
    f = findings[0]
    assert f.message and f.causes and f.fixes and f.evidence["line"] == 1
    assert f.evidence["text"] == ONE_LINERS[signature]


def test_parsed_details_of_a_few_one_liners() -> None:
    assert only(explain_text(ONE_LINERS["cudnn_cublas"]), "cudnn_cublas").evidence["status"] == \
        ["CUBLAS_STATUS_EXECUTION_FAILED"]
    assert only(explain_text(ONE_LINERS["fp16_overflow"]), "fp16_overflow").evidence["min_loss_scale"] == 32768
    assert only(explain_text(ONE_LINERS["nccl_error"]), "nccl_error").evidence["errors"] == ["unhandled system error"]
    state = only(explain_text(ONE_LINERS["state_dict_mismatch"]), "state_dict_mismatch")
    assert state.evidence["prefix"] == "_orig_mod." and "torch.compile" in state.causes[0]
    module = only(explain_text(ONE_LINERS["module_not_found"]), "module_not_found")
    assert module.evidence == {**module.evidence, "name": "LlamaFlashAttention2", "module": "transformers.models.llama"}
    ddp = ONE_LINERS["ddp_unused_parameters"] + "\nParameter indices which did not receive grad for rank 2: 17 18 40"
    assert only(explain_text(ddp), "ddp_unused_parameters").evidence["parameter_indices"] == [17, 18, 40]


# -- CUDA out of memory -------------------------------------------------------------------------

OOM_NEW_FRAGMENTED = log("""
    step 1200 | loss 2.31 | lr 3.0e-04
    step 1210 | loss 2.29 | lr 3.0e-04
    Traceback (most recent call last):
      File "/home/ada/proj/train.py", line 211, in <module>
        main()
      File "/home/ada/proj/train.py", line 188, in main
        loss = model(batch).loss
      File "/opt/env/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1736, in _call_impl
        return forward_call(*args, **kwargs)
    torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 3 has a total capacity of 79.10 GiB of which 1.75 GiB is free. Including non-PyTorch memory, this process has 77.33 GiB memory in use. Of the allocated memory 52.40 GiB is allocated by PyTorch, and 24.12 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.
""")

OOM_NEW_TIGHT = log("""
    torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of 23.68 GiB of which 301.44 MiB is free. Including non-PyTorch memory, this process has 23.37 GiB memory in use. Of the allocated memory 22.86 GiB is allocated by PyTorch, and 117.20 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.
""")

OOM_OLD = log("""
    RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 10.20 GiB already allocated; 3.75 MiB free; 14.90 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.
""")


def test_oom_parses_every_number_and_hints_fragmentation() -> None:
    findings = explain_text(OOM_NEW_FRAGMENTED, source="train.log")
    f = only(findings, "cuda_oom")
    assert (f.type, f.severity, f.step, f.source) == ("memory_pressure", "error", 1210, "train.log")
    e = f.evidence
    assert e["tried_gib"] == 2.5 and e["total_gib"] == 79.1 and e["free_gib"] == 1.75
    assert e["allocated_gib"] == 52.4 and e["reserved_unallocated_gib"] == 24.12
    assert e["reserved_gib"] == pytest.approx(76.52) and e["process_gib"] == 77.33 and e["gpu"] == 3
    assert e["fragmented"] is True
    assert "expandable_segments:True" in f.fixes[0]
    assert "fragmentation" in f.causes[0]
    assert e["frame"] == "/home/ada/proj/train.py:188 in main"
    assert e["line"] == 10
    assert "2.50 GiB" in f.message and "79.10 GiB" in f.message
    assert any("micro-batch" in fix and "accumulation" in fix for fix in f.fixes)
    assert any("checkpointing" in fix for fix in f.fixes) and any("bf16" in fix for fix in f.fixes)
    assert len(findings) == 1  # the traceback is explained, no generic crash on top


def test_oom_without_fragmentation_gives_no_allocator_hint() -> None:
    f = only(explain_text(OOM_NEW_TIGHT), "cuda_oom")
    e = f.evidence
    assert e["tried_gib"] == 0.5 and e["free_gib"] == pytest.approx(0.2944, abs=1e-4)
    assert e["reserved_unallocated_gib"] == pytest.approx(0.1145, abs=1e-4)
    assert "fragmented" not in e
    assert not any("expandable_segments" in x for x in f.fixes + f.causes)
    assert f.step is None


def test_oom_old_format_reserved_in_total() -> None:
    e = only(explain_text(OOM_OLD), "cuda_oom").evidence
    assert e["tried_gib"] == pytest.approx(20 / 1024, abs=1e-5) and e["total_gib"] == 15.78
    assert e["allocated_gib"] == 10.2 and e["reserved_gib"] == 14.9
    assert e["reserved_unallocated_gib"] == pytest.approx(4.7)
    assert e["free_gib"] == pytest.approx(3.75 / 1024, abs=1e-4)
    assert e["fragmented"] is True


def test_fragmentation_rule() -> None:
    assert is_fragmented({"tried_gib": 1.0, "reserved_gib": 40.0, "reserved_unallocated_gib": 10.0})
    assert not is_fragmented({"tried_gib": 1.0, "reserved_gib": 40.0, "reserved_unallocated_gib": 0.5})
    assert not is_fragmented({"tried_gib": 1.0, "reserved_gib": 40.0, "reserved_unallocated_gib": 2.0})
    assert not is_fragmented({"tried_gib": 1.0})


def test_oom_request_larger_than_gpu_and_other_processes() -> None:
    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 96.00 GiB. GPU 0 has a total "
            "capacity of 79.15 GiB of which 2.00 GiB is free. Including non-PyTorch memory, this process has "
            "40.00 GiB memory in use. Of the allocated memory 38.00 GiB is allocated by PyTorch, and 1.00 GiB "
            "is reserved by PyTorch but unallocated.")
    f = only(explain_text(text), "cuda_oom")
    assert f.evidence["other_processes_gib"] == pytest.approx(37.15)
    assert any("larger than the whole GPU" in c for c in f.causes)
    assert any("other processes" in c for c in f.causes)


# -- NCCL ---------------------------------------------------------------------------------------


def nccl_timeout_lines(rank: int, seq: int, count: int) -> list[str]:
    line = (f"[rank{rank}]:[E1103 04:12:55.1234 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught "
            f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=4096, "
            f"NumelOut=4096, Timeout(ms)=600000) ran for 600{rank:03d} milliseconds before timing out.")
    return [line] * count


def test_nccl_watchdog_flood_is_one_hang_finding() -> None:
    progress = [f"[rank0]:step {s} loss 1.9{s % 10} tok/s 81234" for s in range(4400, 4421)]
    text = "\n".join(progress + nccl_timeout_lines(0, 17822, 250) + nccl_timeout_lines(5, 17822, 250))
    findings = explain_text(text)
    assert len(findings) == 1
    f = findings[0]
    assert (f.type, f.severity, f.step) == ("hang", "critical", 4420)
    e = f.evidence
    assert e["count"] == 500 and len(e["lines"]) == 20
    assert e["ranks"] == [0, 5] and e["op_types"] == ["ALLREDUCE"]
    assert e["seq_nums"] == {0: [17822], 5: [17822]} and "desync" not in e
    assert e["timeout_s"] == 600 and e["waited_s"] == pytest.approx(600.005)
    assert "500 lines" in f.message and "ranks 0, 5" in f.message
    assert any("TORCH_NCCL_DESYNC_DEBUG" in fix for fix in f.fixes)


def test_nccl_different_seq_nums_hint_desync() -> None:
    text = "\n".join(nccl_timeout_lines(2, 9001, 1) + nccl_timeout_lines(3, 8990, 1) + nccl_timeout_lines(1, 9001, 1))
    f = only(explain_text(text), "nccl_timeout")
    assert f.evidence["desync"] is True
    assert "rank 3 at SeqNum 8990" in f.causes[0]


def test_nccl_old_format_without_rank_prefix() -> None:
    text = log("""
        Epoch 2:  41%|████      | 8123/19800 [3:01:12<4:20:40,  1.34it/s, loss=1.87, v_num=3]
        [E ProcessGroupNCCL.cpp:475] [Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=550012, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800734 milliseconds before timing out.
    """)
    f = only(explain_text(text), "nccl_timeout")
    assert f.step == 8123 and f.evidence["ranks"] == [6] and f.evidence["op_types"] == ["BROADCAST"]


def test_root_cause_before_nccl_timeout_and_torchrun_wrapper() -> None:
    text = "\n".join([
        "[rank1]:step 300 loss 2.01",
        "[rank1]:Traceback (most recent call last):",
        '[rank1]:  File "/work/llm/train.py", line 90, in <module>',
        "[rank1]:    loss.backward()",
        "[rank1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 1 has a total "
        "capacity of 39.38 GiB of which 512.00 MiB is free.",
        *nccl_timeout_lines(0, 1201, 3),
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "============================================================",
        "train.py FAILED",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2025-03-02_10:11:12",
        "  rank      : 1 (local_rank: 1)",
        "  exitcode  : 1 (pid: 4242)",
    ])
    findings = explain_text(text)
    assert signatures(findings) == ["cuda_oom", "nccl_timeout", "child_failed"]
    oom, hang, wrapper = findings
    assert oom.step == 300 and oom.evidence["ranks"] == [1]
    assert hang.severity == "warning" and hang.evidence["consequence_of"] == "cuda_oom"
    assert wrapper.severity == "info" and wrapper.evidence["exit_codes"] == [1]
    assert wrapper.evidence["failed_ranks"] == [1]


def test_nccl_bootstrap_no_socket_interface() -> None:
    text = log("""
        Traceback (most recent call last):
          File "/srv/run/pretrain.py", line 40, in <module>
            dist.barrier()
        torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, internal error - please report this issue to the NCCL developers, NCCL version 2.21.5
        ncclInternalError: Internal check failed.
        Last error:
        Bootstrap : no socket interface found
    """)
    findings = explain_text(text)
    assert signatures(findings) == ["nccl_bootstrap"]
    f = findings[0]
    assert (f.type, f.severity) == ("crash", "error")
    assert "NCCL_SOCKET_IFNAME" in f.fixes[0]
    assert f.evidence["frame"] == "/srv/run/pretrain.py:40 in <module>"


def test_nccl_nvls_failure() -> None:
    text = log("""
        node07:1432:1501 [4] transport/nvls.cc:254 NCCL WARN Cuda failure 401 'the operation cannot be performed in the present state'
        node07:1432:1501 [4] NCCL INFO init.cc:1402 -> 1
        RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled cuda error, NCCL version 2.26.2
    """)
    findings = explain_text(text)
    assert signatures(findings)[0] == "nccl_nvls"
    assert "NCCL_NVLS_ENABLE=0" in findings[0].fixes[0]
    assert "nccl_error" not in signatures(findings)


def test_nccl_remote_error_is_a_symptom() -> None:
    text = "[rank4]:torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:2027, remote process exited or there was a network error, NCCL version 2.20.5"
    f = only(explain_text(text), "nccl_error")
    assert f.evidence["nccl_version"] == "2.20.5" and f.evidence["ranks"] == [4]
    assert "peer rank died" in f.causes[0]


def test_duplicate_gpu() -> None:
    text = "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nDuplicate GPU detected : rank 1 and rank 0 both on CUDA device 1b000"
    assert signatures(explain_text(text)) == ["duplicate_gpu"]


# -- GPU hardware -------------------------------------------------------------------------------


def test_ecc_error_is_critical_hardware() -> None:
    text = log("""
        iteration     9100/  200000 | lm loss: 2.410 | loss scale: 65536.0 |
        Traceback (most recent call last):
          File "/code/megatron/training.py", line 540, in train_step
            loss.backward()
        RuntimeError: CUDA error: uncorrectable ECC error encountered
        CUDA kernel errors might be asynchronously reported at some other API call.
    """)
    f = only(explain_text(text), "gpu_hardware")
    assert (f.type, f.severity, f.step) == ("crash", "critical", 9100)
    assert f.evidence["hardware"] is True
    assert "drain" in f.fixes[0] and any("checkpoint" in x for x in f.fixes)


def test_xid_79_fallen_off_the_bus() -> None:
    text = log("""
        [Tue Mar  4 02:11:09 2025] NVRM: Xid (PCI:0000:9a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
        [Tue Mar  4 02:11:09 2025] NVRM: GPU 0000:9a:00.0: GPU has fallen off the bus.
    """)
    f = only(explain_text(text), "gpu_hardware")
    assert f.severity == "critical" and f.evidence["xid"] == [79]
    assert f.evidence["pci_bus"] == ["0000:9a:00"] and "fallen off the bus" in f.message
    assert f.evidence["count"] == 2


def test_software_xid_is_not_called_hardware() -> None:
    text = "NVRM: Xid (PCI:0000:3b:00): 13, pid=8812, name=python, Graphics SM Warp Exception on (GPC 1, TPC 2)"
    f = only(explain_text(text), "gpu_hardware")
    assert f.severity == "error" and f.evidence["hardware"] is False and f.evidence["xid"] == [13]


# -- device-side asserts, cuDNN ---------------------------------------------------------------

ASSERT_EMBEDDING = log("""
    Token indices sequence length is longer than the specified maximum sequence length for this model (2048 > 1024). Running this sequence through the model will result in indexing errors
    /pytorch/aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [211,0,0], thread: [64,0,0] Assertion `srcIndex < srcSelectDimSize` failed.
    /pytorch/aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [211,0,0], thread: [65,0,0] Assertion `srcIndex < srcSelectDimSize` failed.
    Traceback (most recent call last):
      File "/app/finetune.py", line 77, in training_step
        out = self.model(**batch)
    RuntimeError: CUDA error: device-side assert triggered
    Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
""")


def test_device_assert_index_names_vocab_and_length() -> None:
    findings = explain_text(ASSERT_EMBEDDING)
    assert signatures(findings) == ["device_assert_index"]  # the generic assert is superseded
    f = findings[0]
    assert f.evidence["assertion"] == "srcIndex < srcSelectDimSize"
    assert f.evidence["kernel"] == "indexSelectLargeIndex"
    assert f.evidence["sequence_length"] == 2048 and f.evidence["max_length"] == 1024
    assert "2048" in f.causes[0] and any("vocab" in c for c in f.causes)
    assert any("CUDA_LAUNCH_BLOCKING=1" in x for x in f.fixes)
    assert f.evidence["frame"] == "/app/finetune.py:77 in training_step"


def test_device_assert_label_out_of_range() -> None:
    text = ("/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
            "thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.\nRuntimeError: CUDA error: device-side assert triggered")
    f = only(explain_text(text), "device_assert_label")
    assert f.evidence["assertion"] == "t >= 0 && t < n_classes" and "label" in f.causes[0]


def test_device_assert_generic_and_bce() -> None:
    generic = explain_text("RuntimeError: CUDA error: device-side assert triggered")
    assert signatures(generic) == ["device_assert"] and "CUDA_LAUNCH_BLOCKING=1" in generic[0].fixes[0]
    bce = ("/pytorch/aten/src/ATen/native/cuda/Loss.cu:94: operator(): block: [0,0,0], thread: [0,0,0] "
           "Assertion `input_val >= zero && input_val <= one` failed.")
    assert "BCEWithLogitsLoss" in only(explain_text(bce), "device_assert_bce").fixes[0]


def test_cudnn_status_parsed() -> None:
    text = "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input."
    f = only(explain_text(text), "cudnn_cublas")
    assert f.evidence["status"] == ["CUDNN_STATUS_NOT_SUPPORTED"] and "no kernel" in f.causes[0]


def test_illegal_memory_access() -> None:
    f = only(explain_text("RuntimeError: CUDA error: an illegal memory access was encountered"), "illegal_memory_access")
    assert (f.type, f.severity) == ("crash", "error") and "CUDA_LAUNCH_BLOCKING=1" in f.fixes[0]


def test_cuda_setup_problems() -> None:
    text = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    assert signatures(explain_text(text)) == ["cuda_setup"]
    assert signatures(explain_text("RuntimeError: CUDA error: invalid device ordinal")) == ["cuda_setup"]


# -- numerics -----------------------------------------------------------------------------------


def test_nan_loss_step_is_the_first_nan() -> None:
    text = "\n".join([f"iter {i}: loss {2.5 - i / 100:.4f}, time 98.1ms" for i in range(40, 50)]
                     + [f"iter {i}: loss nan, time 97.5ms" for i in range(50, 60)])
    f = only(explain_text(text), "nan_loss")
    assert (f.type, f.severity, f.step) == ("nan", "critical", 50)
    assert f.evidence["count"] == 10 and f.evidence["nan_lines"] == 10


def test_nan_abort_messages() -> None:
    for text in ("ValueError: Loss is NaN, stopping training", "RuntimeError: Detected NaN loss at step 17",
                 "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.4}",
                 "step 5 | val_loss:nan"):
        assert signatures(explain_text(text)) == ["nan_loss"], text


def test_anomaly_mode_names_the_op() -> None:
    text = "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output."
    f = only(explain_text(text), "nan_loss")
    assert f.evidence["op"] == "LogSoftmaxBackward0"


def test_nan_lookalikes_are_not_nan() -> None:
    text = log("""
        step:500/3000 val_loss:3.8812 train_time:61234ms step_avg:nanms
        iteration 10 | number of nan iterations:   0 | number of skipped iterations:   0 |
        loss_scale: 1024.0 | nan_count: 0
    """)
    assert explain_text(text) == []


def test_deepspeed_overflow_counted_and_graded() -> None:
    lines = [f"[2025-01-02 10:00:{i:02d},000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! "
             f"Rank 0 Skipping step. Attempted loss scale: {2 ** (16 - i)}, reducing to {2 ** (15 - i)}"
             for i in range(4)]
    f = only(explain_text("\n".join(lines)), "fp16_overflow")
    assert f.type == "loss_scale_collapse" and f.severity == "info"
    assert f.evidence["overflows"] == 4 and f.evidence["min_loss_scale"] == 4096
    collapse = [line.replace("reducing to", "reducing to 1 #") for line in lines]
    assert only(explain_text("\n".join(collapse)), "fp16_overflow").severity == "error"


def test_loss_scale_minimum_abort() -> None:
    text = "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."
    f = only(explain_text(text), "fp16_loss_scale_min")
    assert (f.type, f.severity) == ("loss_scale_collapse", "critical") and "bf16" in f.fixes[0]


# -- processes, host memory ---------------------------------------------------------------------


def test_dataloader_worker_killed_is_host_oom() -> None:
    text = log("""
        Epoch 1:  12%|█▏        | 340/2800 [02:11<15:50,  2.59it/s]
        Traceback (most recent call last):
          File "/opt/env/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1133, in _try_get_data
            data = self._data_queue.get(timeout=timeout)
        RuntimeError: DataLoader worker (pid 51234) is killed by signal: Killed.
        RuntimeError: DataLoader worker (pid(s) 51234) exited unexpectedly
    """)
    findings = explain_text(text)
    assert signatures(findings) == ["dataloader_killed"]
    f = findings[0]
    assert (f.type, f.severity, f.step) == ("memory_pressure", "error", 340)
    assert "num_workers" in f.fixes[0] and "prefetch_factor" in f.fixes[0]


def test_shared_memory_bus_error() -> None:
    text = "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm)."
    assert "--shm-size" in only(explain_text(text), "shm_exhausted").fixes[0]


def test_torchrun_sigkill_is_host_oom() -> None:
    text = log("""
        WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 8811 closing signal SIGTERM
        ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 8810) of binary: /usr/bin/python3
        torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
        ========================================================
        train.py FAILED
        --------------------------------------------------------
        Root Cause (first observed failure):
        [0]:
          time      : 2025-02-11_08:00:01
          host      : gpu-node-3
          rank      : 0 (local_rank: 0)
          exitcode  : -9 (pid: 8810)
          error_file: <N/A>
          traceback : Signal 9 (SIGKILL) received by PID 8810
    """)
    findings = explain_text(text)
    assert signatures(findings) == ["host_oom", "child_failed"]
    assert findings[0].type == "memory_pressure" and findings[0].severity == "error"
    wrapper = findings[1]
    assert wrapper.severity == "info" and wrapper.evidence["exit_codes"] == [-9]
    assert wrapper.evidence["signals"] == ["SIGKILL"] and "out-of-memory killer" in wrapper.causes[0]


def test_workers_stopped_by_torchrun_are_not_an_interrupt() -> None:
    text = log("""
        [rank2]:RuntimeError: CUDA error: an illegal memory access was encountered
        torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
        train.py FAILED
        Failures:
        [1]:
          rank      : 1 (local_rank: 1)
          exitcode  : -15 (pid: 701)
          traceback : Signal 15 (SIGTERM) received by PID 701
        Root Cause (first observed failure):
        [0]:
          rank      : 2 (local_rank: 2)
          exitcode  : 1 (pid: 702)
    """)
    findings = explain_text(text)
    assert signatures(findings) == ["illegal_memory_access", "child_failed"]
    wrapper = findings[1].evidence
    assert wrapper["exit_codes"] == [-15, 1] and wrapper["failed_ranks"] == [1, 2]
    assert (wrapper["root_cause_rank"], wrapper["root_cause_exit_code"]) == (2, 1)
    assert "root cause rank 2, exit code 1" in findings[1].message
    assert findings[1].causes[0].startswith("a Python exception on that rank")
    preempted = "torch.distributed.elastic.multiprocessing.api.SignalException: Process 4100 got signal: 15"
    assert signatures(explain_text(preempted)) == ["interrupted"]


def test_segfault() -> None:
    text = "Fatal Python error: Segmentation fault\n\nThread 0x00007f1c (most recent call first):\n  File \"/app/data.py\", line 12 in decode"
    f = only(explain_text(text), "segfault")
    assert "faulthandler" in f.fixes[0]


def test_address_in_use_names_the_port() -> None:
    text = log("""
        [W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).
        [E socket.cpp:500] [c10d] The server socket has failed to listen on any local network address.
        torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).
    """)
    findings = explain_text(text)
    assert signatures(findings) == ["address_in_use"]
    f = findings[0]
    assert f.evidence["port"] == 29500 and f.evidence["count"] == 3 and "master_port" in f.fixes[0]


def test_rendezvous_timeout_and_interrupts() -> None:
    text = "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined."
    assert signatures(explain_text(text)) == ["rendezvous_timeout"]
    slurm = "slurmstepd: error: *** JOB 771234 ON gpu-12 CANCELLED AT 2025-05-01T10:00:00 DUE TO TIME LIMIT ***"
    f = only(explain_text(slurm), "interrupted")
    assert f.severity == "warning" and f.evidence["reason"] == "time limit"
    node = slurm.replace("TIME LIMIT", "NODE FAILURE")
    assert only(explain_text(node), "interrupted").severity == "error"


# -- code and environment errors ----------------------------------------------------------------


def test_device_mismatch_and_shape_mismatch() -> None:
    text = ("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, "
            "cuda:0 and cpu! (when checking argument for argument index in method wrapper_CUDA__index_select)")
    assert only(explain_text(text), "device_mismatch").evidence["devices"] == ["cuda:0", "cpu"]
    shape = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x512 and 768x10)"
    f = only(explain_text(shape), "shape_mismatch")
    assert f.evidence == {**f.evidence, "mat1": [32, 512], "mat2": [768, 10]}
    assert "expects 768 input features but got 512" in f.message


def test_state_dict_prefix_mismatch() -> None:
    text = ('RuntimeError: Error(s) in loading state_dict for GPT:\n\tMissing key(s) in state_dict: "wte.weight", '
            '"wpe.weight".\n\tUnexpected key(s) in state_dict: "module.wte.weight", "module.wpe.weight".')
    f = only(explain_text(text), "state_dict_mismatch")
    assert f.evidence["kind"] == "missing" and f.evidence["prefix"] == "module."
    assert "DistributedDataParallel" in f.causes[0] and "removeprefix('module.')" in f.fixes[0]
    size = ("size mismatch for lm_head.weight: copying a param with shape torch.Size([50304, 768]) from checkpoint, "
            "the shape in current model is torch.Size([50257, 768]).")
    assert only(explain_text(size), "state_dict_mismatch").evidence["checkpoint_shape"] == "50304, 768"


def test_checkpoint_truncated_and_lfs_pointer() -> None:
    text = log("""
        Traceback (most recent call last):
          File "/job/resume.py", line 31, in load
            state = torch.load(path, map_location="cpu")
        RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory
    """)
    f = only(explain_text(text), "checkpoint_corrupt")
    assert "interrupted" in f.causes[0] and "previous checkpoint" in f.fixes[0]
    lfs = only(explain_text("_pickle.UnpicklingError: invalid load key, 'v'."), "checkpoint_corrupt")
    assert lfs.evidence["git_lfs_pointer"] is True and "git lfs pull" in lfs.fixes[0]


def test_weights_only_names_the_global() -> None:
    text = log("""
        _pickle.UnpicklingError: Weights only load failed. This file can still be loaded, to do so you have two options, do those steps only if you trust the source of the checkpoint.
                WeightsUnpickler error: Unsupported global: GLOBAL argparse.Namespace was not an allowed global by default.
    """)
    f = only(explain_text(text), "weights_only_load")
    assert f.evidence["global"] == "argparse.Namespace" and "add_safe_globals([Namespace])" in f.fixes[0]


def test_module_not_found_maps_pip_name() -> None:
    f = only(explain_text("ModuleNotFoundError: No module named 'cv2'"), "module_not_found")
    assert f.evidence == {**f.evidence, "module": "cv2", "package": "opencv-python"}
    assert "pip install opencv-python" in f.fixes[0]


def test_disk_full() -> None:
    text = "OSError: [Errno 28] No space left on device: '/scratch/run7/checkpoint-4000/optimizer.pt'"
    f = only(explain_text(text), "disk_full")
    assert f.evidence["path"] == "/scratch/run7/checkpoint-4000/optimizer.pt"
    assert any("complete" in x for x in f.fixes)


def test_other_common_errors() -> None:
    cases = {
        "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn": "no_grad",
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.": "ddp_unused_parameters",
        "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation": "inplace_autograd",
        "ImportError: /env/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi": "native_abi",
        "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: AssertionError": "compile_failed",
        "Timeout (0:30:00)!\nThread 0x00007f (most recent call first):": "faulthandler_timeout",
    }
    for text, expected in cases.items():
        assert signatures(explain_text(text))[0] == expected, text


# -- generic tracebacks, rank interleaving, steps ----------------------------------------------


def test_unknown_traceback_becomes_generic_crash() -> None:
    text = log("""
        step 77 loss 3.10
        Traceback (most recent call last):
          File "/home/bo/exp/train.py", line 140, in <module>
            batch = next(it)
          File "/home/bo/exp/data.py", line 58, in __getitem__
            row = self.index[key]
          File "/usr/lib/python3.11/collections/__init__.py", line 1121, in __getitem__
            raise KeyError(key)
        KeyError: 'attention_mask'
    """)
    findings = explain_text(text)
    assert len(findings) == 1
    f = findings[0]
    assert (f.type, f.severity, f.step) == ("crash", "error", 77)
    assert f.evidence["exception"] == "KeyError" and f.evidence["exception_message"] == "'attention_mask'"
    assert f.evidence["frame"] == "/home/bo/exp/data.py:58 in __getitem__"
    assert "KeyError" in f.message and "data.py:58" in f.message


def test_chained_traceback_is_named_after_its_root() -> None:
    text = log("""
        Traceback (most recent call last):
          File "/p/cfg.py", line 3, in load
            return cfg["model"]
        KeyError: 'model'

        During handling of the above exception, another exception occurred:

        Traceback (most recent call last):
          File "/p/main.py", line 9, in <module>
            load()
        ValueError: bad config
    """)
    findings = explain_text(text)
    assert len(findings) == 1 and findings[0].evidence["exception"] == "KeyError"


def test_interleaved_rank_tracebacks_are_separated_and_deduplicated() -> None:
    frames = ['Traceback (most recent call last):', '  File "/w/train.py", line 12, in <module>',
              '    step()', '  File "/w/model.py", line 40, in step', '    x = y / z',
              'ZeroDivisionError: division by zero']
    lines = ["[default0]:iteration 120/1000 | loss 2.2", "[default1]:iteration 120/1000 | loss 2.2"]
    for a, b in zip(frames, frames):  # both ranks print the same traceback line by line, interleaved
        lines += [f"[default0]:{a}", f"[default1]:{b}"]
    findings = explain_text("\n".join(lines))
    assert len(findings) == 1
    f = findings[0]
    assert f.evidence["ranks"] == [0, 1] and f.evidence["count"] == 2 and f.step == 120
    assert f.evidence["frame"] == "/w/model.py:40 in step"
    assert "empty dataset" in f.causes[0]


def test_interleaved_distinct_errors_give_distinct_findings() -> None:
    text = "\n".join([
        "[rank0]:Traceback (most recent call last):",
        "[rank1]:Traceback (most recent call last):",
        '[rank0]:  File "/w/a.py", line 1, in f',
        '[rank1]:  File "/w/b.py", line 2, in g',
        "[rank0]:FileNotFoundError: [Errno 2] No such file or directory: '/data/shard-0007.bin'",
        "[rank1]:RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ])
    findings = explain_text(text)
    assert sorted(signatures(findings)) == ["cuda_oom", "unhandled_exception"]
    generic = only(findings, "unhandled_exception")
    assert generic.evidence["ranks"] == [0] and generic.evidence["frame"] == "/w/a.py:1 in f"


def test_cpp_terminate_without_python_traceback() -> None:
    text = "terminate called after throwing an instance of 'c10::Error'\n  what():  mysterious failure in op foo"
    f = explain_text(text)[0]
    assert f.evidence["exception"] == "c10::Error" and "mysterious failure" in f.message


@pytest.mark.parametrize(("progress", "step"), [
    ("iteration    31000/  100000 | consumed samples: 123 | lm loss: 2.0", 31000),
    ("iter 8 step 1: loss 1.12, iter time: 1819.72ms", 8),
    ("step 4/100 | train loss 5.2 | norm 1.1", 4),
    ("{'loss': 1.7, 'learning_rate': 2e-05, 'epoch': 1.0, 'step': 640}", 640),
    ("| epoch 004 | loss 4.1 | num_updates 2200 | lr 0.0005", 2200),
    (" 45%|████▌     | 450/1000 [01:23<01:40,  5.40it/s]", 450),
    ("Epoch 0:   6%|█ | 3204/50015 [6:28:43<94:39:17, 1.37it/s, loss=2.6, global_step=3.2e+4]", 3204),
    ("Loading checkpoint shards: 100%|██████████| 4/4 [00:03<00:00,  1.2it/s]", None),
    ("config: max_steps: 1000 warmup_iters=200 eval_interval 50", None),
])
def test_step_extraction(progress: str, step: int | None) -> None:
    text = f"{progress}\nRuntimeError: CUDA error: an illegal memory access was encountered"
    assert explain_text(text)[0].step == step


def test_tqdm_carriage_returns_take_the_latest_update() -> None:
    bar = "\r".join(f"Epoch 0:  1%| | {i}/9000 [00:0{i % 10}<1:00:00, 2.1it/s]" for i in range(10, 16))
    text = bar + "\r\nRuntimeError: CUDA error: an illegal memory access was encountered\r\n"
    f = explain_text(text)[0]
    assert f.step == 15 and f.evidence["line"] == 2  # "\r" rewrites a line; only "\n" ends one


def test_messages_from_logs_are_kept_as_plain_text() -> None:
    f = explain_text("ValueError: <script>alert(1)</script>\n" + 'Traceback (most recent call last):\n  File "/x.py", line 1, in f\nValueError: <b>bad</b>')[0]
    assert "<b>bad</b>" in f.message  # escaping is the renderer's job; findings carry the raw text


def test_findings_serialise_to_json() -> None:
    import json

    for finding in explain_text(OOM_NEW_FRAGMENTED + "\n" + "\n".join(nccl_timeout_lines(0, 5, 2))):
        json.dumps(finding.to_dict())


def test_large_log_names_the_last_step() -> None:  # timing lives in bench/, never in tests
    body = "\n".join(f"[default{i % 8}]:iteration {i}/90000 | lm loss: 2.5 | grad norm: 0.3 |" for i in range(60000))
    findings = explain_text(body + "\n" + OOM_NEW_TIGHT)
    assert findings[0].step == 59999


# -- real public logs (read in place, skipped when the folder is absent) ------------------------

needs_realruns = pytest.mark.skipif(REALRUNS is None, reason="../shared/realruns not present")


@needs_realruns
def test_real_nemo_nccl_watchdog_hang() -> None:
    text = (REALRUNS / "nemo_style_progress_nccl_watchdog_hang_32040" / "train.log").read_text()
    findings = explain_text(text)
    f = findings[0]
    assert (f.type, f.severity, f.step) == ("hang", "critical", 32040)
    assert f.evidence["ranks"] == [0, 7] and f.evidence["count"] == 5
    assert f.evidence["timeout_s"] == 1800 and f.evidence["waited_s"] > 25000
    assert f.evidence["desync"] is True


@needs_realruns
def test_real_bigscience_ecc_crash() -> None:
    text = (REALRUNS / "bigscience_tr1_13b_ecc_crash_43680" / "train.log").read_text()
    findings = explain_text(text)
    assert len(findings) == 1
    f = findings[0]
    assert (f.type, f.severity, f.step) == ("crash", "critical", 43680)
    assert f.evidence["hardware"] is True and "ECC" in f.message
    assert "drain" in f.fixes[0]


@needs_realruns
def test_real_logs_never_crash_and_healthy_ones_stay_quiet() -> None:
    for path in sorted(REALRUNS.glob("*/*.log")):
        findings = explain_text(path.read_text(errors="replace"), source=str(path))
        if "healthy" in path.parent.name:
            assert [f for f in findings if f.severity != "info"] == [], path
