"""Real torchrun ranks on gloo (3 processes, CPU): a healthy stretch with no finding, then the straggler
named (one launch for both, to keep the suite short); a hang seen by every rank's watchdog with the
collective on the healthy ranks and the blocking call on the stuck one (also through `stethoscope probe --all`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from stethoscope.store.query import open_run
from tests.conftest import REPO, run_cli

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import os, sys, time, torch, torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    from stethoscope import Monitor
    from stethoscope.act import JsonlFile
    from stethoscope.probe import ProbeConfig

    run_dir, mode, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    alerts = [JsonlFile(run_dir + "-alerts.jsonl")] if mode == "hang" else None  # one file: every rank's pages
    rank = dist.get_rank()
    SLOW_FROM = 40 if mode == "straggler" and rank == 1 else None  # healthy for 40 steps, then rank 1 slows
    step = 0

    class Body(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)

        def forward(self, x):
            time.sleep(0.026 if SLOW_FROM is not None and step >= SLOW_FROM else 0.020)  # 30% longer
            return self.lin(x)

    def wait_for_release(flag):
        while not os.path.exists(flag):
            time.sleep(0.02)

    torch.manual_seed(0)
    model = Body()
    if mode == "late":  # DDP: the gradient all-reduce inside backward waits for the rank that comes late
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    cfg = ProbeConfig(health_every=10, straggler_threshold=0.85, hang_floor_s=2.0, hang_sample_s=0.5,
                      faulthandler=False)
    with Monitor(run_dir, model=model, optimizer=opt, serve=cfg, alerts=alerts) as mon:
        for step in range(steps):
            if mode == "hang" and rank == 2 and step == 15:
                wait_for_release(os.path.join(run_dir, "release"))
            if mode == "late" and rank == 1 and step >= 40:
                time.sleep(0.02)  # a slow batch fetch: the others wait for it in their backward's all-reduce
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            mean = loss.detach().clone()
            dist.all_reduce(mean)  # the loss averaged over the ranks, for the log
            mon.step(step, loss=mean / dist.get_world_size())
    dist.destroy_process_group()
""")


def _launch(tmp_path, mode, steps):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=3",
                             str(script), str(tmp_path / "run"), mode, str(steps)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _finish(proc, timeout=180):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]


def _findings(run, types=("straggler", "hang", "rank_divergence")):
    with open_run(run) as r:
        marks = ",".join("?" * len(types))
        _, rows = r.query(f"SELECT rank, type, step, message, data FROM findings WHERE type IN ({marks}) "
                          "ORDER BY rank, id", tuple(types))
    return [(rank, t, step, msg, json.loads(data)) for rank, t, step, msg, data in rows]


def test_a_healthy_run_names_no_one_then_the_rank_that_computes_30_percent_longer_is_named_alone(tmp_path):
    proc = _launch(tmp_path, "straggler", 80)
    _finish(proc)
    found = _findings(tmp_path / "run")
    assert [f for f in found if f[2] < 40] == [], found  # (c) 40 healthy steps, 4 health reports: nothing
    assert [f for f in found if f[1] != "straggler"] == [], found  # no hang, no desync, at any time
    stragglers = [f for f in found if not f[4]["evidence"].get("recovered")]
    assert [f[4]["evidence"]["rank"] for f in stragglers] == [1], found
    rank, _, step, message, data = stragglers[0]
    assert rank == 0 and step <= 60  # judged on rank 0 within 2 report intervals (health_every=10) of step 40
    assert "rank 1 is a straggler" in message and data["evidence"]["score"] < 0.85
    with open_run(tmp_path / "run") as r:
        assert r.ranks == [0, 1, 2]


def test_a_rank_late_to_ddps_all_reduce_is_named_by_its_time_outside_the_backward_pass(tmp_path):
    """user-trial-2 item 8: rank 1 spends 20 ms fetching each batch from step 40; under DDP ranks 0 and 2 wait for
    it inside their backward, so step times agree and forwards are alike: only the step less the backward names it
    (and the data wait is its cause)."""
    proc = _launch(tmp_path, "late", 80)
    _finish(proc)
    found = _findings(tmp_path / "run")
    assert [f for f in found if f[2] < 40] == [], found
    stragglers = [f for f in found if f[1] == "straggler" and not f[4]["evidence"].get("recovered")]
    assert [f[4]["evidence"]["rank"] for f in stragglers] == [1], found
    evidence = stragglers[0][4]["evidence"]
    assert evidence["signal"].startswith("time outside the backward pass") and evidence["score"] < 0.85, evidence
    assert any(c.startswith("data loading") for c in stragglers[0][4]["causes"]), stragglers[0]


def test_a_rank_blocking_before_all_reduce_is_a_hang_on_every_rank_seen_through_probe_all(tmp_path, cli_env):
    run = tmp_path / "run"
    proc = _launch(tmp_path, "hang", 25)
    try:
        hangs = _wait_for(lambda: _hangs_by_rank(run), 3, timeout=120, proc=proc)
        for rank in (0, 1):
            ev = hangs[rank]["evidence"]
            assert (ev["where"], ev["call"]) == ("collective", "all_reduce"), ev
        assert hangs[2]["evidence"]["where"] == "user_code" and "time.sleep" in hangs[2]["evidence"]["call"]
        assert all(h["step"] == 14 for h in hangs.values())
        res = run_cli("probe", "--all", str(run), "backtrace", "--json", env=cli_env, timeout=60)
        assert res.returncode == 0, res.stderr
        answers = {a["rank"]: a for a in json.loads(res.stdout)}
        assert sorted(answers) == [0, 1, 2] and all(a["ok"] for a in answers.values())
        for rank, a in answers.items():
            main = next(t for t in a["result"]["threads"] if t["main"])
            names = [f["function"] for f in main["frames"]]
            if rank == 2:  # in its wait loop: asleep, or (caught a moment later) inside os.path.exists
                at = len(names) - 1 - names[::-1].index("wait_for_release")
                assert names[at - 1] == "<module>" or at == 0, names
                assert all(not f["file"].endswith("train.py") for f in main["frames"][at + 1:]), names
                assert main["frames"][at]["code"] in ("time.sleep(0.02)", "while not os.path.exists(flag):"), names
            else:
                assert "all_reduce" in names and main["frames"][-1]["file"].endswith("distributed_c10d.py"), names
        table = run_cli("probe", "--all", str(run), "status", env=cli_env, timeout=60)
        assert table.returncode == 0 and table.stdout.count("collective: all_reduce") == 2, table.stdout
        assert "user_code" in table.stdout
        query = run_cli("probe", "--all", str(run), "query", "--json",
                        "SELECT thread, function FROM backtrace WHERE main = 1 AND depth = 0", env=cli_env)
        rows = {a["rank"]: a["result"]["rows"] for a in json.loads(query.stdout)}
        assert rows[2] == [["MainThread", "wait_for_release"]] and rows[0][0][1] != "wait_for_release"
    finally:
        (run / "release").touch()
    _finish(proc)
    resolved = [f for f in _findings(run, ("hang",)) if f[4]["evidence"].get("recovered")]
    assert sorted(f[0] for f in resolved) == [0, 1, 2]
    pages = [json.loads(line) for line in (tmp_path / "run-alerts.jsonl").read_text().splitlines()]
    hang = [(p["kind"], p["rank"], p["key"]) for p in pages if p["type"] == "hang"]
    assert [k for k, _, _ in hang] == ["trigger", "resolve"] and len({(r, k) for _, r, k in hang}) == 1, hang


def _hangs_by_rank(run):
    if not run.is_dir() or len(list(run.glob("rank-*.sqlite"))) < 3:
        return {}
    return {rank: data for rank, t, _, _, data in _findings(run, ("hang",)) if not data["evidence"].get("recovered")}


def _wait_for(fn, n, timeout, proc):
    end = time.monotonic() + timeout
    got = {}
    while time.monotonic() < end:
        got = fn()
        if len(got) >= n:
            return got
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    raise AssertionError(f"only {sorted(got)} reported a hang; torchrun: {proc.poll()}")


RANK0_ONLY = textwrap.dedent("""
    import sys, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    from stethoscope import Monitor
    from stethoscope.probe import ProbeConfig
    mon = Monitor(sys.argv[1], serve=ProbeConfig(health_every=5, health_agree_s=2.0)) if dist.get_rank() == 0 else None
    for step in range(30):
        t = torch.ones(1)
        dist.all_reduce(t)
        if mon is not None:
            mon.step(step, loss=float(t))
    if mon is not None:
        mon.close()
    dist.destroy_process_group()
    print("finished")
""")


def test_a_monitor_on_rank_0_only_never_hangs_the_run_in_the_health_gather(tmp_path):
    script = tmp_path / "rank0.py"
    script.write_text(RANK0_ONLY)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          str(script), str(tmp_path / "run")], capture_output=True, text=True, env=env, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count("finished") == 2
    assert "cross-rank health checks are off: not every rank has a Monitor" in res.stderr
