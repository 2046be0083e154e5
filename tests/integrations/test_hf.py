"""The HF adapter on a real transformers Trainer: a tiny GPT-2 built from a config, a few CPU steps."""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import stethoscope  # noqa: E402
from stethoscope.integrations.hf import STATE_FILE, StethoscopeCallback  # noqa: E402
from stethoscope.diagnose.stored import run_incidents  # noqa: E402
from stethoscope.store.query import open_run  # noqa: E402

torch.set_num_threads(1)

SEQ, BATCH, VOCAB = 16, 4, 64


class Tokens(torch.utils.data.Dataset):
    """Random token sequences, labels = inputs (the model shifts them)."""

    def __init__(self, n: int = 64) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class NanAfter(transformers.TrainerCallback):
    """A fault: after the optimizer step of `step`, a weight every token goes through turns NaN."""

    def __init__(self, step: int) -> None:
        self.step, self.done = step, False

    def on_step_end(self, args, state, control, model=None, **kw):
        if state.global_step == self.step and not self.done:
            self.done = True
            with torch.no_grad():
                model.transformer.ln_f.weight[0] = float("nan")


def _run(out: Path) -> Path:
    (run,) = (out / "stethoscope").iterdir()  # one run, named after the output folder (or run_name)
    return run


def _trainer(out: Path, callback, max_steps: int, **args) -> transformers.Trainer:
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=SEQ)
    model = transformers.GPT2LMHeadModel(config)
    options = dict(output_dir=str(out), max_steps=max_steps, per_device_train_batch_size=BATCH, learning_rate=1e-3,
                   logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
                   dataloader_num_workers=0, max_grad_norm=1.0, seed=0)
    options.update(args)
    return transformers.Trainer(model=model, args=transformers.TrainingArguments(**options), train_dataset=Tokens(),
                                eval_dataset=Tokens(8), callbacks=[callback])


def test_records_what_the_monitor_records(tmp_path):
    cb = StethoscopeCallback(flush_interval=0.2)
    trainer = _trainer(tmp_path, cb, max_steps=6, eval_strategy="steps", eval_steps=3)
    trainer.train()
    assert cb.monitor is None  # closed at train end
    logged = {row["step"]: row for row in trainer.state.log_history if "grad_norm" in row}
    with open_run(_run(tmp_path)) as run:
        steps, losses = run.series("train/loss")
        assert steps == [1, 2, 3, 4, 5, 6] and all(1.0 < v < 10.0 for v in losses)
        # the Trainer's logged loss (the mean over the logging interval: here one step) is ours
        assert losses[0] == pytest.approx(trainer.state.log_history[0]["loss"], rel=1e-4)
        g_steps, norms = run.series("grad/norm")
        assert g_steps == sorted(logged) and norms == pytest.approx([logged[s]["grad_norm"] for s in g_steps])
        assert run.series("grad/clip_coef")[1] == pytest.approx([min(1.0, 1.0 / (g + 1e-6)) for g in norms])
        lr_steps, lrs = run.series("opt/lr")
        assert lr_steps == steps and lrs[0] == pytest.approx(1e-3) and lrs[-1] < lrs[0]  # linear decay
        assert run.series("eval/loss")[0] == [3, 6]
        tps_steps, tps = run.series("perf/tokens_per_s")
        step_times = dict(zip(*run.series("perf/step_time_s")))
        assert tps_steps == [2, 3, 4, 5, 6]  # tokens counted from the batch: BATCH x SEQ per step
        assert [v * step_times[s] for s, v in zip(tps_steps, tps)] == pytest.approx([BATCH * SEQ] * 5)
        assert [v * step_times[s] for s, v in zip(*run.series("perf/samples_per_s"))] == pytest.approx([BATCH] * 5)
        assert run.series("memory/rss_gib")[1][0] > 0
        for name in ("param/norm", "update/ratio", "grad/zero_frac"):  # the Trainer's optimizer, hooked
            assert run.series(name)[0], name
        _, rows = run.query("SELECT step, ids FROM batches ORDER BY step")
        assert [r[0] for r in rows] == steps and all(len(eval(r[1])) == BATCH for r in rows)
        meta = run.meta()
        assert '"completed"' in meta["status"] or meta["status"] == "completed"
        assert "max_steps" in meta["config"]


def test_grad_norm_is_the_trainers_pre_clip_norm_only(tmp_path):
    """With the optimizer hooked, its pre-step hook sees the grads after the Trainer clipped them: that
    post-clip norm must not stand in for grad/norm on the steps the Trainer does not log."""
    trainer = _trainer(tmp_path, StethoscopeCallback(), max_steps=4, logging_steps=2, max_grad_norm=0.01)
    trainer.train()
    logged = {r["step"]: r["grad_norm"] for r in trainer.state.log_history if "grad_norm" in r}
    with open_run(_run(tmp_path)) as run:
        steps, norms = run.series("grad/norm")
        assert run.series("param/norm")[0]  # the optimizer is hooked
    assert steps == [2, 4] and norms == pytest.approx([logged[2], logged[4]]) and min(norms) > 0.1


def test_gradient_accumulation_gives_the_step_mean_loss(tmp_path):
    cb = StethoscopeCallback()
    trainer = _trainer(tmp_path, cb, max_steps=2, gradient_accumulation_steps=2, per_device_train_batch_size=2)
    trainer.train()
    with open_run(_run(tmp_path)) as run:
        steps, losses = run.series("train/loss")
        _, rows = run.query("SELECT ids FROM batches ORDER BY step")
    assert steps == [1, 2] and all(len(eval(r[0])) == 4 for r in rows)  # two micro-batches of 2
    logged = [r["loss"] for r in trainer.state.log_history if "loss" in r and "train_loss" not in r]
    assert losses == pytest.approx(logged, rel=1e-3)


def test_control_requests_become_trainer_control(tmp_path, caplog):
    class Stopper(transformers.TrainerCallback):  # stands for a rule that asks to checkpoint, then stop
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == 2:
                cb.monitor.control.request_checkpoint("test: save now")
            if state.global_step == 3:
                cb.monitor.control.request_stop("test: stop")

    cb = StethoscopeCallback()
    trainer = _trainer(tmp_path, cb, max_steps=10)
    trainer.callback_handler.callbacks.insert(0, Stopper())
    with caplog.at_level(logging.WARNING):
        trainer.train()
    assert trainer.state.global_step == 3  # stopped
    assert (tmp_path / "checkpoint-2").is_dir() and (tmp_path / "checkpoint-3").is_dir()
    assert (tmp_path / "checkpoint-3" / STATE_FILE).is_file()
    assert "test: stop" in caplog.text
    with open_run(_run(tmp_path)) as run:
        assert run.series("train/loss")[0] == [1, 2, 3]
        assert run.meta()["status"] == "stopped"


def test_resume_from_checkpoint_continues_the_same_run(tmp_path):
    trainer = _trainer(tmp_path, StethoscopeCallback(), max_steps=4, save_strategy="steps", save_steps=2)
    trainer.train()
    first = open_run(_run(tmp_path))
    with first:
        before = dict(zip(*first.series("train/loss")))
    assert sorted(before) == [1, 2, 3, 4] and (tmp_path / "checkpoint-4" / STATE_FILE).is_file()
    cb = StethoscopeCallback()
    trainer = _trainer(tmp_path, cb, max_steps=6, save_strategy="steps", save_steps=2)
    trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    assert _run(tmp_path).name == tmp_path.name  # the same run directory, continued (no NAME-2 beside it)
    with open_run(_run(tmp_path)) as run:
        steps, losses = run.series("train/loss")
        assert steps == [1, 2, 3, 4, 5, 6]
        assert all(not math.isnan(v) for v in losses)
        assert dict(zip(steps, losses))[4] == before[4]  # steps before the resume untouched
        _, rows = run.query("SELECT COUNT(*) FROM points_superseded")
        assert rows[0][0] == 0


def test_a_run_recorded_before_runs_were_named_is_resumed_where_it_is(tmp_path):
    old = tmp_path / "stethoscope"  # the layout before runs were named: the folder holds the run itself
    _trainer(tmp_path, StethoscopeCallback(old), max_steps=2, save_strategy="steps", save_steps=2).train()
    trainer = _trainer(tmp_path, StethoscopeCallback(), max_steps=4, save_strategy="steps", save_steps=2)
    trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))
    assert not (old / tmp_path.name).exists()
    with open_run(old) as run:
        assert run.series("train/loss")[0] == [1, 2, 3, 4]


def test_missing_transformers_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    import stethoscope.integrations.hf as hf

    monkeypatch.delitem(hf.__dict__, "StethoscopeCallback", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'stethoscope\[hf\]'"):
        hf.StethoscopeCallback  # noqa: B018


def test_a_failure_inside_the_callback_never_reaches_training(tmp_path, caplog):
    cb = StethoscopeCallback()
    with caplog.at_level(logging.WARNING):
        cb.monitor = object()  # a callback in a broken state: every hook would raise
        assert cb.on_step_end(None, None, None) is None
        assert cb.on_log(None, None, None, logs={"grad_norm": 1.0}) is None
    assert cb.errors == 2 and caplog.text.count("stethoscope failed in") == 1


def _finite_state(folder: Path) -> tuple[int, int]:
    """(non-finite tensors, tensors) over a saved HF checkpoint's weights and optimizer state."""
    from safetensors.torch import load_file

    tensors = list(load_file(folder / "model.safetensors").values())
    opt = torch.load(folder / "optimizer.pt", weights_only=True)["state"]
    tensors += [t for s in opt.values() for t in s.values() if t.dim() > 0]
    return sum(not bool(torch.isfinite(t).all()) for t in tensors), len(tensors)


def test_recovery_rolls_back_the_full_state_in_place_and_never_saves_a_nan(tmp_path):
    """Issue 27: the weights came back, the AdamW moments did not; the next step poisoned them again, the run
    stopped at 32 and saved checkpoint-32 with every weight and moment NaN."""
    ck = stethoscope.Checkpoints(tmp_path / "ck", every=5, keep_last=2, on_signal=None)
    cb = StethoscopeCallback(checkpoints=ck, recovery=stethoscope.Recovery(patience=5), flush_interval=0.2)
    trainer = _trainer(tmp_path / "out", cb, max_steps=40, save_strategy="steps", save_steps=4)
    trainer.callback_handler.callbacks.insert(0, NanAfter(30))
    trainer.train()
    assert trainer.state.global_step == 40  # rolled back in place and trained on, not stopped
    (rb,) = _rollbacks(tmp_path / "out")
    assert rb["onset"] in (31, 32) and rb["restored"] <= 29
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    opt_state = trainer.optimizer.state_dict()["state"]
    assert opt_state and all(torch.isfinite(t).all() for s in opt_state.values() for t in s.values())
    saved = sorted((tmp_path / "out").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    # checkpoint-32 is saved only when the rollback came before step 32 trained (the writer thread saw the NaN
    # in time); when 32 was trained on the NaN state its save is held
    due = [f"checkpoint-{s}" for s in range(4, 41, 4)]
    assert [p.name for p in saved] in (due, [n for n in due if n != "checkpoint-32"])
    for folder in saved:
        assert _finite_state(folder)[0] == 0, folder.name
    with open_run(_run(tmp_path / "out")) as run:
        steps, losses = run.series("train/loss")
        assert steps[-1] == 40 and all(math.isfinite(v) for v in losses)  # the NaN steps are set aside
        assert losses[-1] < losses[0]


def _rollbacks(out: Path) -> list[dict]:
    import json

    with open_run(_run(out)) as run:
        _, rows = run.query("SELECT data FROM events WHERE kind = 'recovery' ORDER BY id")
    return [d for d in map(json.loads, (r[0] for r in rows)) if d.get("action") == "rollback"]


def test_a_nan_stops_training_at_its_step_and_is_not_saved(tmp_path, caplog):
    cb = StethoscopeCallback()
    trainer = _trainer(tmp_path, cb, max_steps=40, save_strategy="steps", save_steps=31)
    trainer.callback_handler.callbacks.insert(0, NanAfter(30))
    with caplog.at_level(logging.ERROR):
        trainer.train()
    assert trainer.state.global_step == 31 and cb.stopped.startswith("nan at step 31: non-finite train/loss")
    assert "1 non-finite record at step 31" in cb.stopped  # the incident, as diagnose words it
    with open_run(_run(tmp_path)) as run:
        assert ("nan", 31) in {(f.type, f.step) for f in run_incidents(run).findings}
    assert not (tmp_path / "checkpoint-31").exists()  # the save due at the NaN step was held
    assert "on_critical" in caplog.text
    with open_run(_run(tmp_path)) as run:
        assert run.meta()["status"] == "stopped"


def test_on_critical_continue_only_records(tmp_path):
    cb = StethoscopeCallback(on_critical="continue")
    trainer = _trainer(tmp_path, cb, max_steps=34)
    trainer.callback_handler.callbacks.insert(0, NanAfter(30))
    trainer.train()
    assert trainer.state.global_step == 34 and cb.stopped is None
    with pytest.raises(ValueError, match="on_critical"):
        StethoscopeCallback(on_critical="halt")


def test_runs_are_named_after_run_name_or_the_output_folder(tmp_path):
    """Issue 27: every HF run was named `stethoscope` (its folder): two runs shared a Prometheus label and
    `export parquet` refused the second without --name."""
    from stethoscope.store.export import export_runs

    _trainer(tmp_path / "exp-a", StethoscopeCallback(), max_steps=2).train()
    _trainer(tmp_path / "exp-b", StethoscopeCallback(), max_steps=2, run_name="lr 3e-4/b").train()
    a, b = _run(tmp_path / "exp-a"), _run(tmp_path / "exp-b")
    assert (a.name, b.name) == ("exp-a", "lr-3e-4-b")
    pytest.importorskip("pyarrow")
    result = export_runs([a, b], tmp_path / "parquet")
    assert {r.run for r in result.ranks} == {"exp-a", "lr-3e-4-b"}
