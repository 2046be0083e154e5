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

from stethoscope.integrations.hf import STATE_FILE, StethoscopeCallback  # noqa: E402
from stethoscope.store.query import open_run  # noqa: E402

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


def _trainer(out: Path, callback, max_steps: int, **args) -> transformers.Trainer:
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=SEQ)
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
    with open_run(tmp_path / "stethoscope") as run:
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
        _, rows = run.query("SELECT step, ids FROM batches ORDER BY step")
        assert [r[0] for r in rows] == steps and all(len(eval(r[1])) == BATCH for r in rows)
        meta = run.meta()
        assert '"completed"' in meta["status"] or meta["status"] == "completed"
        assert "max_steps" in meta["config"]


def test_gradient_accumulation_gives_the_step_mean_loss(tmp_path):
    cb = StethoscopeCallback()
    trainer = _trainer(tmp_path, cb, max_steps=2, gradient_accumulation_steps=2, per_device_train_batch_size=2)
    trainer.train()
    with open_run(tmp_path / "stethoscope") as run:
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
    with open_run(tmp_path / "stethoscope") as run:
        assert run.series("train/loss")[0] == [1, 2, 3]
        assert run.meta()["status"] == "stopped"


def test_resume_from_checkpoint_continues_the_same_run(tmp_path):
    trainer = _trainer(tmp_path, StethoscopeCallback(), max_steps=4, save_strategy="steps", save_steps=2)
    trainer.train()
    first = open_run(tmp_path / "stethoscope")
    with first:
        before = dict(zip(*first.series("train/loss")))
    assert sorted(before) == [1, 2, 3, 4] and (tmp_path / "checkpoint-4" / STATE_FILE).is_file()
    cb = StethoscopeCallback()
    trainer = _trainer(tmp_path, cb, max_steps=6, save_strategy="steps", save_steps=2)
    trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    assert not (tmp_path / "stethoscope-2").exists()  # the same run directory, continued
    with open_run(tmp_path / "stethoscope") as run:
        steps, losses = run.series("train/loss")
        assert steps == [1, 2, 3, 4, 5, 6]
        assert all(not math.isnan(v) for v in losses)
        assert dict(zip(steps, losses))[4] == before[4]  # steps before the resume untouched
        _, rows = run.query("SELECT COUNT(*) FROM points_superseded")
        assert rows[0][0] == 0


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
