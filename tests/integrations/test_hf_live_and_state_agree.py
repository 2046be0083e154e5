"""The same HF Trainer run diagnosed live (the callback's store: the loss of every optimizer step) and from its
trainer_state.json (the Trainer's log: the mean loss over each `logging_steps` interval) reaches the same
conclusion (user trial item 1: the live run said "still improving" with an `underfitting` note, its
trainer_state.json "healthy": 10 logged means were "too short to classify", and the "still falling at the end"
window was a share of the records, not of the steps). A real Trainer, a tiny GPT-2 from a config, CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from click.testing import CliRunner  # noqa: E402

from stethoscope.cli.main import cli  # noqa: E402
from stethoscope.diagnose.stored import incidents_at  # noqa: E402
from stethoscope.integrations.hf import StethoscopeCallback  # noqa: E402

torch.set_num_threads(1)
SEQ, VOCAB, STEPS = 16, 64, 200


class Pattern(torch.utils.data.Dataset):
    """Shifted copies of one 8-token pattern: learnable, slowly at a small LR."""

    def __init__(self, n: int = 64) -> None:
        g = torch.Generator().manual_seed(0)
        base = torch.randint(0, VOCAB, (8,), generator=g)
        shifts = torch.randint(0, 8, (n,), generator=g)
        self.ids = torch.stack([torch.roll(torch.cat([base, base]), int(k)) for k in shifts])

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _train(out: Path, lr: float) -> tuple[Path, Path]:
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=SEQ)
    args = transformers.TrainingArguments(output_dir=str(out), max_steps=STEPS, per_device_train_batch_size=4,
                                          learning_rate=lr, lr_scheduler_type="constant", logging_steps=20,
                                          save_strategy="steps", save_steps=STEPS, report_to=[], use_cpu=True,
                                          disable_tqdm=True, dataloader_num_workers=0, seed=0)
    transformers.Trainer(model=transformers.GPT2LMHeadModel(config), args=args, train_dataset=Pattern(),
                         callbacks=[StethoscopeCallback()]).train()
    (run,) = (out / "stethoscope").iterdir()
    return run, out / f"checkpoint-{STEPS}"


def _conclusion(path: Path) -> tuple[str, list[str]]:
    (d,) = incidents_at(path)
    return d.label, sorted(f.type for f in d.findings if f.type in ("underfitting", "healthy", "plateau"))


@pytest.mark.parametrize("lr, label", [(1e-4, "healthy, still improving"), (5e-5, "healthy, converged")])
def test_live_store_and_trainer_state_reach_the_same_conclusion(tmp_path, lr, label):
    run, checkpoint = _train(tmp_path, lr)
    live, logged = _conclusion(run), _conclusion(checkpoint / "trainer_state.json")
    assert live == logged, (live, logged)
    assert live[0] == label and (("underfitting" in live[1]) == (label == "healthy, still improving"))
    assert _conclusion(checkpoint) == live  # the checkpoint folder, as `stethoscope diagnose` takes it
    header = CliRunner().invoke(cli, ["diagnose", str(checkpoint / "trainer_state.json")]).output.splitlines()[0]
    assert header.endswith(f"run: {label}"), header
