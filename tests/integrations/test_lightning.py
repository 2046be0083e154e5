"""The Lightning adapter on a real Trainer: a tiny next-token model, a few CPU steps."""

from __future__ import annotations

import json
import logging
import math
import re
import sys

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning.pytorch")

import stethoscope  # noqa: E402
from stethoscope.integrations.lightning import StethoscopeCallback  # noqa: E402
from stethoscope.store.query import open_run  # noqa: E402

torch.set_num_threads(1)

SEQ, BATCH, VOCAB = 8, 4, 32


class TinyLM(L.LightningModule):
    def __init__(self, lr: float = 0.05, adam: bool = False) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.emb = torch.nn.Embedding(VOCAB, 16)
        self.head = torch.nn.Linear(16, VOCAB)
        self.losses: list[float] = []
        self.grad_norms: list[float] = []

    def _loss(self, batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.head(self.emb(x)).flatten(0, 1), y.flatten())

    def training_step(self, batch, _i):
        loss = self._loss(batch)
        self.losses.append(loss.item())
        return loss

    def validation_step(self, batch, _i):
        self.log("val_loss", self._loss(batch))

    def on_before_optimizer_step(self, optimizer):  # the reference: the norm Lightning is about to clip
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        self.grad_norms.append(torch.nn.utils.get_total_norm(grads).item())

    def configure_optimizers(self):
        if self.hparams.adam:
            return torch.optim.Adam(self.parameters(), lr=1e-2)
        opt = torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, 0.5),
                                                   "interval": "step"}}


class NanAfter(L.Callback):
    """A fault: after the optimizer step of `step`, the embedding turns NaN."""

    def __init__(self, step: int) -> None:
        self.step, self.done = step, False

    def on_train_batch_end(self, trainer, pl_module, *_):
        if trainer.global_step == self.step and not self.done:
            self.done = True
            with torch.no_grad():
                pl_module.emb.weight.fill_(float("nan"))


def _run(root):
    (run,) = (root / "stethoscope").iterdir()  # one run, named after the logger's version or the root folder
    return run


def _data(n: int = 64):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, VOCAB, (n, SEQ), generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, (x + 1) % VOCAB), batch_size=BATCH)


def _trainer(root, callbacks, max_steps: int, **kw) -> L.Trainer:
    options = dict(max_steps=max_steps, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                   enable_model_summary=False, enable_checkpointing=False, default_root_dir=str(root),
                   gradient_clip_val=0.5, num_sanity_val_steps=0, limit_val_batches=2, val_check_interval=3)
    options.update(kw)
    return L.Trainer(callbacks=callbacks, **options)


def test_records_what_the_monitor_records(tmp_path):
    torch.manual_seed(0)
    model, cb = TinyLM(), StethoscopeCallback()
    _trainer(tmp_path, [cb], max_steps=6).fit(model, _data(), _data(8))
    assert cb.monitor is None
    with open_run(_run(tmp_path)) as run:
        steps, losses = run.series("train/loss")
        assert steps == [1, 2, 3, 4, 5, 6] and losses == pytest.approx(model.losses, rel=1e-5)
        g_steps, norms = run.series("grad/norm")
        assert g_steps == steps and norms == pytest.approx(model.grad_norms, rel=1e-5)  # pre-clip
        assert max(norms) > 0.5  # ...so clipping was engaged, and the coefficient says by how much
        assert run.series("grad/clip_coef")[1] == pytest.approx([min(1.0, 0.5 / (g + 1e-6)) for g in norms])
        lrs = run.series("opt/lr")[1]
        assert lrs[0] == pytest.approx(0.05) and lrs[1] == pytest.approx(0.025)
        assert run.series("eval/loss")[0] == [3, 6]
        step_times = dict(zip(*run.series("perf/step_time_s")))
        tps = run.series("perf/tokens_per_s")
        assert [v * step_times[s] for s, v in zip(*tps)] == pytest.approx([BATCH * SEQ] * 5)  # from the batch
        _, rows = run.query("SELECT COUNT(*), MIN(LENGTH(ids)) FROM batches")
        assert rows[0][0] == 6
        assert run.meta()["status"] == "completed" and '"lr": 0.05' in run.meta()["config"]


def test_control_requests_save_and_stop(tmp_path, caplog):
    class Stopper(L.Callback):  # stands for a rule asking to checkpoint, then stop
        def on_train_batch_end(self, trainer, *_):
            if trainer.global_step == 1:
                cb.monitor.control.request_checkpoint("test: save now")
            if trainer.global_step == 2:
                cb.monitor.control.request_stop("test: stop")

    torch.manual_seed(0)
    cb = StethoscopeCallback()
    with caplog.at_level(logging.WARNING):
        trainer = _trainer(tmp_path, [Stopper(), cb], max_steps=20)
        trainer.fit(TinyLM(), _data())
    assert trainer.global_step == 2  # requests are carried out right after the step they were made at
    saved = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert saved == ["stethoscope-step=1.ckpt", "stethoscope-step=2.ckpt"]
    assert "test: stop" in caplog.text
    with open_run(_run(tmp_path)) as run:
        assert run.meta()["status"] == "stopped"


def test_resume_from_checkpoint_continues_the_same_run(tmp_path):
    torch.manual_seed(0)
    ckpt = L.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=3, save_top_k=-1)
    _trainer(tmp_path, [StethoscopeCallback(), ckpt], max_steps=3, enable_checkpointing=True).fit(TinyLM(), _data())
    saved = next((tmp_path / "ckpt").glob("*.ckpt"))
    state = torch.load(saved, weights_only=False)["callbacks"]
    assert any("detection" in v for v in state.values())  # the detectors' state travels in the checkpoint
    cb = StethoscopeCallback()
    _trainer(tmp_path, [cb], max_steps=6).fit(TinyLM(), _data(), ckpt_path=str(saved))
    assert _run(tmp_path).name == tmp_path.name  # continued, no NAME-2 beside it
    with open_run(_run(tmp_path)) as run:
        assert run.series("train/loss")[0] == [1, 2, 3, 4, 5, 6]
        assert run.query("SELECT COUNT(*) FROM points_superseded")[1][0][0] == 0


def test_missing_lightning_is_one_line_naming_the_extra(monkeypatch):
    for name in ("lightning.pytorch", "pytorch_lightning"):
        monkeypatch.setitem(sys.modules, name, None)
    import stethoscope.integrations.lightning as integration

    monkeypatch.delitem(integration.__dict__, "StethoscopeCallback", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'stethoscope\[lightning\]'"):
        integration.StethoscopeCallback  # noqa: B018


def test_a_failure_inside_the_callback_never_reaches_training(caplog):
    cb = StethoscopeCallback()
    with caplog.at_level(logging.WARNING):
        cb.monitor = object()  # a callback in a broken state: every hook would raise
        assert cb.on_train_batch_end(None, None, None, None, 0) is None
        assert cb.on_before_optimizer_step(None, None, None) is None
    assert cb.errors == 2 and caplog.text.count("stethoscope failed in") == 1


def test_a_nan_stops_training_at_its_step(tmp_path, caplog):
    """Issue 27: a NaN did not stop training (and a stop waited for a flush: 9 steps late)."""
    torch.manual_seed(0)
    cb = StethoscopeCallback()
    trainer = _trainer(tmp_path, [NanAfter(30), cb], max_steps=60, val_check_interval=None, limit_val_batches=0)
    with caplog.at_level(logging.ERROR):
        trainer.fit(TinyLM(), _data(512))
    assert trainer.global_step == 31 and cb.stopped.startswith("nan at step 31: non-finite train/loss")
    assert "non-finite record" in cb.stopped  # the incident, as diagnose words it
    assert "on_critical" in caplog.text
    with open_run(_run(tmp_path)) as run:
        assert run.meta()["status"] == "stopped"


def test_recovery_out_of_rollbacks_stops_at_the_nan_step(tmp_path):
    """Recovery that can only give up does not delay the stop (it waited for a flush: 9 steps late)."""
    torch.manual_seed(0)
    ck = stethoscope.Checkpoints(tmp_path / "ck", every=5, on_signal=None)
    cb = StethoscopeCallback(checkpoints=ck, recovery=stethoscope.Recovery(max_rollbacks=0))
    trainer = _trainer(tmp_path, [NanAfter(30), cb], max_steps=60, val_check_interval=None, limit_val_batches=0)
    trainer.fit(TinyLM(), _data(512))
    assert trainer.global_step == 31 and cb.stopped.startswith("nan at step 31: non-finite train/loss")
    assert not (tmp_path / "checkpoints").exists()  # nothing saved of the NaN state


class Diverging(TinyLM):
    """Real training whose loss reads as a curve that settles, then climbs from step 60 (the gradients are real)."""

    def training_step(self, batch, _i):
        loss = self._loss(batch)
        step = self.trainer.global_step
        level = 2.0 + 0.05 * math.sin(step) if step < 60 else 2.0 * 1.05 ** (step - 60)
        return loss - loss.detach() + level


def test_a_divergence_stops_training(tmp_path):
    torch.manual_seed(0)
    cb = StethoscopeCallback(flush_interval=0.05)
    trainer = _trainer(tmp_path, [cb], max_steps=150, val_check_interval=None, limit_val_batches=0)
    trainer.fit(Diverging(), _data(2048))
    assert cb.stopped is not None and cb.stopped.startswith("divergence at step")
    found = int(re.match(r"divergence at step (\d+)", cb.stopped).group(1))
    assert 60 < found < 100  # the detectors dated it where the climb starts
    # and training stopped once they said so, not at the end: how many steps ran between the finding and the stop
    # depends on when the writer thread (which runs the live detectors every flush_interval / 2) got the CPU
    assert found <= trainer.global_step < 150


def test_on_critical_continue_only_records(tmp_path):
    torch.manual_seed(0)
    cb = StethoscopeCallback(on_critical="continue")
    trainer = _trainer(tmp_path, [NanAfter(30), cb], max_steps=34, val_check_interval=None, limit_val_batches=0)
    trainer.fit(TinyLM(), _data(512))
    assert trainer.global_step == 34 and cb.stopped is None
    with pytest.raises(ValueError, match="on_critical"):
        StethoscopeCallback(on_critical="halt")


def test_recovery_rolls_back_the_full_state_in_place(tmp_path):
    torch.manual_seed(0)
    ck = stethoscope.Checkpoints(tmp_path / "ck", every=5, keep_last=2, on_signal=None)
    cb = StethoscopeCallback(checkpoints=ck, recovery=stethoscope.Recovery(patience=5))
    model = TinyLM(adam=True)
    trainer = _trainer(tmp_path, [NanAfter(30), cb], max_steps=40, val_check_interval=None, limit_val_batches=0)
    trainer.fit(model, _data(512))
    assert trainer.global_step == 40 and cb.stopped is None  # rolled back in place and trained on
    assert all(torch.isfinite(p).all() for p in model.parameters())
    state = trainer.optimizers[0].state_dict()["state"]
    assert state and all(torch.isfinite(t).all() for s in state.values() for t in s.values())
    with open_run(_run(tmp_path)) as run:
        _, rows = run.query("SELECT data FROM events WHERE kind = 'recovery' ORDER BY id")
        steps, losses = run.series("train/loss")
    (rb,) = [d for d in map(json.loads, (r[0] for r in rows)) if d["action"] == "rollback"]
    assert rb["onset"] == 31 and rb["restored"] == 25
    assert steps[-1] == 40 and all(math.isfinite(v) for v in losses)


def test_runs_are_named_after_the_loggers_version(tmp_path):
    """Issue 27: every Lightning run was named `stethoscope` (its folder): two runs shared a Prometheus label
    and `export parquet` refused the second without --name. A resume continues the run it resumes."""
    from lightning.pytorch.loggers import CSVLogger

    from stethoscope.store.export import export_runs

    def fit(steps: int, **kw):
        torch.manual_seed(0)
        ckpt = L.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=2, save_top_k=-1)
        _trainer(tmp_path, [StethoscopeCallback(), ckpt], max_steps=steps, logger=CSVLogger(tmp_path),
                 enable_checkpointing=True, limit_val_batches=0).fit(TinyLM(), _data(), **kw)

    fit(2)
    fit(2)
    runs = sorted((tmp_path / "stethoscope").iterdir())
    assert [r.name for r in runs] == ["version_0", "version_1"]
    fit(4, ckpt_path=str(tmp_path / "ckpt" / "epoch=0-step=2.ckpt"))  # a new logger version, the same run
    assert sorted(r.name for r in (tmp_path / "stethoscope").iterdir()) == ["version_0", "version_1"]
    pytest.importorskip("pyarrow")
    result = export_runs(runs, tmp_path / "parquet")
    assert {r.run for r in result.ranks} == {"version_0", "version_1"}


def test_a_checkpoint_lightning_saves_after_a_nan_stop_is_named(tmp_path, caplog):
    """user-trial-2: Lightning validates and saves once more when training stops; its default ModelCheckpoint
    wrote the NaN weights of the stop step (and, keeping 1, deleted the good one) without a word."""
    torch.manual_seed(0)
    cb = StethoscopeCallback()
    trainer = _trainer(tmp_path, [NanAfter(30), cb], max_steps=60, val_check_interval=None, limit_val_batches=0,
                       enable_checkpointing=True)
    with caplog.at_level(logging.WARNING):
        trainer.fit(TinyLM(), _data(512))
    saved = trainer.checkpoint_callback.best_model_path
    weights = torch.load(saved, weights_only=False)["state_dict"]["emb.weight"]
    assert not torch.isfinite(weights).all()  # what the file holds: the state the run stopped at
    said = [r.getMessage() for r in caplog.records if "ModelCheckpoint saved" in r.getMessage()]
    assert len(said) == 1 and saved in said[0] and "do not resume from it" in said[0]
    assert "nan at step 31" in said[0]
