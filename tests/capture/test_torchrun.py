"""Real torchrun ranks on the gloo backend: every rank records its own store, read back as one view."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from stethoscope.store.query import open_run
from tests.conftest import REPO

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import sys, torch, torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    from stethoscope import Monitor
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(sys.argv[1], model=model, optimizer=opt, tokens_per_step=8) as mon:
        for step in range(20):
            g = torch.Generator().manual_seed(100 * dist.get_rank() + step)
            x = torch.randn(8, 4, generator=g)
            loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
            loss.backward(); opt.step(); opt.zero_grad()
            mon.step(step, loss=loss)
    dist.destroy_process_group()
""")


def test_two_gloo_ranks_each_write_their_store(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          str(script), str(tmp_path / "run")], capture_output=True, text=True, env=env, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    with open_run(tmp_path / "run") as r:
        assert r.ranks == [0, 1]
        _, rows = r.query("SELECT rank, COUNT(*) FROM metrics WHERE name = 'train/loss' GROUP BY rank")
        assert rows == [(0, 20), (1, 20)]
        # DDP all-reduces gradients: both ranks see the same global grad norm, but their own losses
        n0, n1 = r.series("grad/norm", 0)[1], r.series("grad/norm", 1)[1]
        assert n0 == pytest.approx(n1, rel=1e-5)
        assert r.series("train/loss", 0)[1] != r.series("train/loss", 1)[1]
        assert r.meta(1)["world_size"] == "2" and r.meta(1)["rank"] == "1"
