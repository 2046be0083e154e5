"""A tiny real training run for the dashboard tests: torch on CPU, a Monitor with checkpoints, a loss spike
at SPIKE (a bad batch scaled up), a rollback at ROLLBACK, then steps at PACE s until STOP_FILE appears.

    python -m tests.serve.live_run RUN_DIR CKPT_DIR STOP_FILE [MAX_STEPS]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

SPIKE = 150
ROLLBACK = 190  # at this step the loop rolls back to the checkpoint at or before 180
PACE = 0.005


def main(run_dir: str, ckpt_dir: str, stop_file: str, max_steps: int = 100_000) -> None:
    import torch

    import stethoscope as st

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, w = torch.randn(256, 8), torch.randn(8, 1)
    y = x @ w
    ck = st.Checkpoints(ckpt_dir, every=60)
    rolled = False
    with st.Monitor(run_dir, model=model, optimizer=opt, tokens_per_step=64, flush_interval=0.1,
                    checkpoints=ck, config={"lr": 0.05, "hidden": 16}) as mon:
        step = 0
        while step < max_steps and not Path(stop_file).exists():
            i = (step * 32) % 224
            xb, yb = x[i:i + 32], y[i:i + 32]
            if step == SPIKE:
                xb = xb * 40  # one bad batch: the loss and the gradient jump
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            if step == SPIKE:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            mon.step(step, loss=loss)
            if step % 50 == 0:
                with torch.no_grad():
                    mon.eval(step, eval_loss=torch.nn.functional.mse_loss(model(x[224:]), y[224:]))
            if step == ROLLBACK and not rolled:
                rolled = True
                back = ck.rollback(before=180)
                step = (back if back is not None else step) + 1
                continue
            step += 1
            time.sleep(PACE)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], *(int(a) for a in sys.argv[4:5]))
