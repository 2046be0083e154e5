"""A resume that did not restore the weights (user trial item 2): the step counter goes on while the model starts
from fresh weights, and the loss jumps back to the level the run began at. The diagnosis names the resume as the
cause, at the resume's step, in a stored run (real torch training, a real Monitor resumed with `resume=True`) and
in a text log that says it resumed; a resume that did load the weights has no such finding."""

from __future__ import annotations

import torch

import stethoscope
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.diagnose.resumes import WEIGHTS_NOT_LOADED
from stethoscope.diagnose.stored import incidents_at
from stethoscope.importers.registry import read_any

torch.set_num_threads(1)
FIRST, SECOND = 150, 100


def _model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))


def _train(run, load_weights: bool) -> list[tuple[int, float]]:
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(2048, 16, generator=g), torch.randn(16, 1, generator=g)
    y = x @ w + 0.1 * torch.randn(2048, 1, generator=g)
    torch.manual_seed(0)
    net = _model()
    logged = []

    def session(net, start: int, n: int, resume: bool) -> None:
        opt = torch.optim.Adam(net.parameters(), lr=3e-3)
        with stethoscope.Monitor(run, model=net, optimizer=opt, resume=resume, serve=False) as mon:
            for step in range(start, start + n):
                i = torch.randint(0, 2048, (32,), generator=g)
                loss = torch.nn.functional.mse_loss(net(x[i]), y[i])
                opt.zero_grad()
                loss.backward()
                opt.step()
                mon.step(step, loss=loss.detach())
                logged.append((step, float(loss)))

    session(net, 1, FIRST, False)
    saved = {k: v.clone() for k, v in net.state_dict().items()}
    torch.manual_seed(1)
    fresh = _model()  # the script built a new model on resume ...
    if load_weights:
        fresh.load_state_dict(saved)  # ... and loaded the checkpoint's weights (or, the bug, did not)
    session(fresh, FIRST + 1, SECOND, True)
    return logged


def test_a_resume_that_did_not_load_the_weights_is_named_as_the_cause(tmp_path):
    _train(tmp_path / "run", load_weights=False)
    (d,) = incidents_at(tmp_path / "run")
    (f,) = [f for f in d.findings if f.evidence.get("weights_not_loaded")]
    assert f.step == FIRST + 1 and f.severity == "error" and f.causes[0] == WEIGHTS_NOT_LOADED
    assert f is d.findings[0] and "resume at step 151" in f.message
    assert d.label != "healthy"


def test_a_resume_that_loaded_the_weights_is_no_such_incident(tmp_path):
    _train(tmp_path / "run", load_weights=True)
    (d,) = incidents_at(tmp_path / "run")
    assert not [f for f in d.findings if f.evidence.get("weights_not_loaded") or WEIGHTS_NOT_LOADED in f.causes]


def test_a_text_log_that_names_the_resume(tmp_path):
    logged = _train(tmp_path / "run", load_weights=False)
    lines = [f"step {s} | loss {v:.4f}" for s, v in logged]
    lines.insert(FIRST, f"Loaded checkpoint from checkpoints/step_{FIRST}.pt, resuming training")
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    (run,) = read_any(log)
    d = diagnose_run(run)
    (f,) = [f for f in d.findings if f.evidence.get("weights_not_loaded")]
    assert f.step == FIRST + 1 and f.causes[0] == WEIGHTS_NOT_LOADED and f.severity == "error"
