"""A crashed run is never called `converged` (user trial: the header of an HF run whose `train()` raised said
`converged`). The Trainer calls no callback when `train()` raises, so the run was closed at exit as a plain
"interpreter exit"; the callback now closes it with the exception, and the header names the crash. A real
Trainer (a tiny GPT-2 from a config) in a child process whose uncaught exception ends it, a real store."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from click.testing import CliRunner  # noqa: E402

from stethoscope.cli.main import cli  # noqa: E402
from stethoscope.diagnose.stored import incidents_at  # noqa: E402
from stethoscope.store.query import open_run  # noqa: E402

SCRIPT = textwrap.dedent('''
    import sys, torch, transformers
    torch.set_num_threads(1)
    from stethoscope.integrations.hf import StethoscopeCallback
    SEQ, VOCAB = 16, 64

    class Tokens(torch.utils.data.Dataset):  # 8 of 64 tokens at random: learnt at once, then flat (converged)
        def __init__(self):
            self.ids = torch.randint(0, 8, (64, SEQ), generator=torch.Generator().manual_seed(0))
        def __len__(self):
            return len(self.ids)
        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "labels": self.ids[i]}

    class Boom(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == 70:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=SEQ)
    args = transformers.TrainingArguments(output_dir=sys.argv[1], max_steps=100, per_device_train_batch_size=4,
                                          learning_rate=3e-3, lr_scheduler_type="constant", logging_steps=1,
                                          save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
                                          dataloader_num_workers=0, seed=0)
    transformers.Trainer(model=transformers.GPT2LMHeadModel(config), args=args, train_dataset=Tokens(),
                         callbacks=[StethoscopeCallback(), Boom()]).train()
''')


def test_a_trainer_that_raised_is_named_crashed_in_the_header_never_converged(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode != 0 and "illegal memory access" in proc.stderr
    (run,) = (tmp_path / "out" / "stethoscope").iterdir()
    with open_run(run) as reader:
        assert reader.meta(reader.ranks[0])["status"].startswith("failed: RuntimeError: CUDA error")
    (d,) = incidents_at(run)
    assert d.classification["label"] == "converged"  # the curve alone would say so
    assert d.label.startswith(("crashed at step 69: ", "crashed at step 70: ")), d.label  # its last recorded step
    assert "illegal memory access" in d.label and "converged" not in d.label
    out = CliRunner().invoke(cli, ["diagnose", str(run)]).output
    assert d.label in out and "converged" not in out.splitlines()[0]
    assert json.loads(CliRunner().invoke(cli, ["diagnose", str(run), "--json"]).output)["label"] == d.label
