"""A fixed training run through the Monitor, and the points it stores: the same points (series, step, value)
must come out of every change to the capture and record paths (tests/capture/test_stored_points.py).

    python tests/capture/stored_points_run.py OUT.json   # rewrites the golden file (from the tree on sys.path)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

# Series whose values are the wall clock's or the host's (step time, GC pauses, RSS): compared by step only.
CLOCK_SERIES = ("perf/", "system/", "memory/rss", "stethoscope/", "gc/")


def run(run_dir: Path, clip: bool) -> dict[str, Any]:
    """Train a small fixed model 35 steps with the Monitor; the stored points and batches."""
    from stethoscope import Monitor

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=7, gamma=0.5)
    gen = torch.Generator().manual_seed(1)
    mon = Monitor(run_dir, model=model, optimizer=opt, tokens_per_step=32, serve=False, gpu_health=False,
                  flush_interval=1e6, system_every=1e9, max_grad_norm=1.0 if clip else None)
    for step in range(35):
        x = torch.randn(4, 8, generator=gen)
        loss = model(x).pow(2).mean() * (1 + step % 5)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0) if clip else None
        opt.step()
        sched.step()
        mon.step(step, loss=loss, grad_norm=norm, batch_ids=torch.arange(4 * step, 4 * step + 4),
                 **{"train/acc": loss.detach() * 0.1, "train/count": step})
        opt.zero_grad(set_to_none=True)
        if step % 12 == 11:
            mon.eval(step, eval_loss=loss.detach() + 1, ppl=float(step))
            mon.log({"custom/int": step, "custom/float": 0.5 * step}, step)
    mon.close()
    return stored(run_dir)


def stored(run_dir: Path) -> dict[str, Any]:
    from stethoscope.store.query import open_run

    with open_run(run_dir) as r:
        _, points = r.query("SELECT name, step, value FROM metrics ORDER BY name, step")
        _, rows = r.query("SELECT step, count(*) FROM batches GROUP BY step ORDER BY step")
    return {"points": [[n, s, None if n.startswith(CLOCK_SERIES) else v] for n, s, v in points],
            "batches": [list(row) for row in rows]}


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        out = {"defaults": run(Path(d) / "a", False), "grad_norm passed": run(Path(d) / "b", True)}
    Path(sys.argv[1]).write_text(json.dumps(out, indent=0) + "\n")
