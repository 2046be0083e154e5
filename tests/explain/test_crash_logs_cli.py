"""Crash logs through `explain` and `diagnose` (issue 27): an NCCL-timeout log leads with the timeout and
keeps its fixes, the watchdog's DistBackendError abort is its consequence, and a crash log with no
training step is explained by `diagnose` instead of "no known log format"."""

from __future__ import annotations

import json

from click.testing import CliRunner

from stethoscope.cli.main import cli
from stethoscope.findings.advice import advise
from stethoscope.explain import explain_text
from stethoscope.records import Finding


def _timeout(rank: int, ms: int) -> str:
    return (f"[rank{rank}]:[E1103 04:12:55.1 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
            f"Timeout(ms)=600000) ran for {ms} milliseconds before timing out.")


def _abort(rank: int) -> list[str]:  # the watchdog takes the process down; its what() line never got out
    return [f"[rank{rank}]:terminate called after throwing an instance of 'c10::DistBackendError'",
            f"[rank{rank}]:Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 "
            "(most recent call first):",
            f"[rank{rank}]:frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f3a in libc10.so)"]


NCCL_LOG = "\n".join(["[rank0]:step 1200 | loss 2.3141 | lr 3.0e-04 | 412.5 ms/step", _timeout(3, 600034),
                      _timeout(5, 600071), *_abort(3), *_abort(5)]) + "\n"

OOM = ("[rank1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 1 has a total capacity "
       "of 39.38 GiB of which 512.00 MiB is free.")
CRASH_LOG = "\n".join(["[rank1]:Traceback (most recent call last):", '[rank1]:  File "/work/llm/train.py", line 90, '
                       "in <module>", "[rank1]:    loss.backward()", OOM, _timeout(0, 600100)]) + "\n"


def test_explain_leads_with_the_nccl_timeout_and_its_abort_follows():
    found = explain_text(NCCL_LOG)
    assert [f.evidence["signature"] for f in found] == ["nccl_timeout", "unhandled_exception"]
    hang, abort = found
    assert hang.severity == "critical" and "consequence_of" not in hang.evidence and hang.step == 1200
    assert abort.severity == "warning" and abort.evidence["consequence_of"] == "nccl_timeout"
    assert abort.evidence["exception"] == "c10::DistBackendError"


def test_a_real_root_still_leads_and_a_lone_backend_error_stays_an_error():
    found = explain_text("\n".join([*CRASH_LOG.splitlines(), *_abort(0)]))
    assert [f.evidence["signature"] for f in found][0] == "cuda_oom"
    assert all(f.evidence.get("consequence_of") == "cuda_oom" for f in found[1:])
    (alone,) = explain_text("\n".join(_abort(2)))
    assert alone.severity == "error" and "consequence_of" not in alone.evidence


def test_diagnose_keeps_the_fixes_a_finding_came_with(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(NCCL_LOG)
    res = CliRunner().invoke(cli, ["diagnose", str(log), "--json"])
    assert res.exit_code == 0, res.output
    hang = next(f for f in json.loads(res.stdout)["findings"] if f["type"] == "hang")
    assert hang["fixes"][0] == "find the earliest error in every rank's log: that rank is the cause"
    assert any("TORCH_NCCL_DESYNC_DEBUG" in fix for fix in hang["fixes"])
    assert not any(fix.startswith("start with this cause") for fix in hang["fixes"])
    gpu = Finding("gpu_xid", "critical", 5, "XID 79", causes=["XID 79 on GPU 0: fell off the bus"],
                  fixes=["drain this node", "see `dmesg | grep -i xid` on the node"])
    assert advise(gpu).fixes == ["drain this node", "see `dmesg | grep -i xid` on the node"]


def test_diagnose_explains_a_crash_log_with_no_steps(tmp_path):
    log = tmp_path / "crash.log"
    log.write_text(CRASH_LOG)
    res = CliRunner().invoke(cli, ["diagnose", str(log), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["format"] == "crash log" and out["steps"] == 0
    assert [f["type"] for f in out["findings"]] == ["memory_pressure", "hang"]
    assert out["findings"][1]["evidence"]["consequence_of"] == "cuda_oom"
    assert "crash log" in res.stderr and f"stethoscope explain {log}" in res.stderr
    res = CliRunner().invoke(cli, ["diagnose", str(log)])
    assert res.exit_code == 0 and "CUDA out of memory" in res.stdout and "no known log format" not in res.output
    plain = tmp_path / "notes.txt"
    plain.write_text("hello\nworld\n")
    res = CliRunner().invoke(cli, ["diagnose", str(plain)])
    assert res.exit_code == 2 and "no known log format" in res.stderr


LOGGING_ERROR_LOG = "\n".join([
    "10it [00:07,  1.39it/s]--- Logging error ---",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.11/logging/__init__.py", line 1110, in emit',
    "    msg = self.format(record)",
    '  File "/usr/lib/python3.11/logging/__init__.py", line 377, in getMessage',
    "    msg = msg % self.args",
    "TypeError: not all arguments converted during string formatting",
    "Call stack:",
    '  File "/home/me/eval.py", line 92, in main',
    "    predictions = pipe(",
    "Message: 'You seem to be using the pipelines sequentially on GPU.'",
    "Arguments: (<class 'UserWarning'>,)",
    *(f"{i}it [00:0{i - 10}, 1.2{i - 10}it/s]" for i in range(11, 16)),
    "{'rouge1': 0.41, 'rouge2': 0.19, 'rougeL': 0.33}",
]) + "\n"


def test_a_logging_error_the_handler_swallowed_is_no_crash(tmp_path):
    """wild-logs-7 M-E: Python logging's `--- Logging error ---` block (a traceback, `Call stack:`, then the job
    printing on) was called ERROR crash. The handler printed and swallowed it: info, and `diagnose` does not
    take the log for a crash log. The same traceback without the logging banner stays an error."""
    found = explain_text(LOGGING_ERROR_LOG)
    assert [(f.severity, f.evidence.get("handled")) for f in found] == [("info", True)]
    assert "no crash" in found[0].message
    log = tmp_path / "eval.out"
    log.write_text(LOGGING_ERROR_LOG)
    res = CliRunner().invoke(cli, ["diagnose", str(log)])
    assert "crash log" not in res.output and "ERROR" not in res.output
    crashed = explain_text(LOGGING_ERROR_LOG.replace("--- Logging error ---", ""))
    assert [f.severity for f in crashed] == ["error"]
