"""Every labelled real run (../shared/realruns beside the repository, or $STETHOSCOPE_REALRUNS) reads
into a sensible ImportedRun. Skipped where that folder is absent: the logs are not ours to copy."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from stethoscope.importers import read_any
from stethoscope.importers.base import ImportedRun
from stethoscope.importers.megatron import GLOBAL_BATCH, LOSS_MISSING
from stethoscope.records import (
    EVAL_LOSS, GRAD_NORM, LOSS, LOSS_SCALE, LR, SKIPPED, STEP_TIME, TFLOPS,
)
from tests.importers.series import names, series


def realruns() -> Path | None:
    env = os.environ.get("STETHOSCOPE_REALRUNS")
    for folder in ([Path(env)] if env else []) + [Path(__file__).resolve().parents[3] / "shared" / "realruns"]:
        if (folder / "labels.json").is_file():
            return folder
    return None


ROOT = realruns()
CASES = json.loads((ROOT / "labels.json").read_text()) if ROOT else []
pytestmark = pytest.mark.skipif(ROOT is None, reason="shared/realruns not found beside the repository")

# labels.json's format → (our format, our dialect or None)
FORMATS = {
    "megatron_deepspeed_log": ("megatron", "megatron"), "megatron_lm_log": ("megatron", "megatron"),
    "gpt_neox_log": ("megatron", "gpt-neox"), "fairseq_log": ("fairseq", None),
    "fairseq_log_legacy": ("fairseq", None), "hf_trainer_state": ("hf_trainer_state", None),
    "lightning_metrics_csv": ("lightning_csv", None), "litgpt_finetune_log": ("textlog", "litgpt"),
    "litgpt_log": ("textlog", "litgpt"), "llmc_main_log": ("textlog", "llmc"),
    "modded_nanogpt_log": ("textlog", "modded_nanogpt"), "nanochat_log": ("textlog", "nanochat"),
    "nanogpt_log": ("textlog", "nanogpt"), "nemo_lightning_progress_log": ("textlog", "progress"),
}


def near(value: float, rel: float = 1e-6) -> object:
    return pytest.approx(value, rel=rel)


def text_of(run: ImportedRun) -> str:
    return "\n".join(line.text for line in run.lines)


CHECKS: dict[str, Callable[[ImportedRun], None]] = {}


def check(case: str) -> Callable[[Callable[[ImportedRun], None]], Callable[[ImportedRun], None]]:
    def register(fn: Callable[[ImportedRun], None]) -> Callable[[ImportedRun], None]:
        CHECKS[case] = fn
        return fn

    return register


@check("bigscience_tr11_176b_bloom_eval_hang_45000")
def _(run: ImportedRun) -> None:
    assert series(run, LOSS) == {45000: 2.113567}
    assert series(run, EVAL_LOSS) == {45000: 2.327091}
    assert [ln.step for ln in run.lines] == [45000] * 6 and "PULSE" in run.lines[-1].text
    assert run.lines[-1].time == 1651384578.0  # 2022-05-01 05:56:18, read as UTC


@check("bigscience_tr11_176b_bloom_loss_spike_31219")
def _(run: ImportedRun) -> None:
    norms = series(run, GRAD_NORM)
    assert norms[31214] == 0.242 and norms[31215] == 0.947 and norms[31219] == 960.351
    assert series(run, LOSS)[31219] == 5.098124
    assert sorted(series(run, LOSS)) == [*range(31214, 31223), 31250, 31251]


@check("bigscience_tr11_176b_bloom_throughput_drop_42783")
def _(run: ImportedRun) -> None:
    assert series(run, TFLOPS) == {42780: 149.10, 42781: 149.09, 42782: 147.58, 42783: 142.32, 42784: 141.09}
    assert series(run, STEP_TIME)[42783] == 110.17
    assert series(run, LR)[42780] == 4.475e-05  # the field split over two lines
    assert run.warnings == []


@check("bigscience_tr1_13b_ecc_crash_43680")
def _(run: ImportedRun) -> None:
    assert series(run, LOSS) == {43680: 2.635663}
    assert series(run, STEP_TIME) == {43680: near(25.5934)}
    assert "cudaErrorECCUncorrectable" in text_of(run)
    assert run.lines[0].text.startswith("Traceback") and run.lines[0].step == 43680


@check("bigscience_tr1_13b_loss_spike_29050")
def _(run: ImportedRun) -> None:
    assert series(run, LOSS)[29050] == 7.343709
    assert series(run, LOSS_SCALE)[29060] == 4096.0
    assert GRAD_NORM not in names(run) and "grad_norm_zero" in run.meta["notes"]


@check("bigscience_tr8_104b_exp11_spike_11448")
def _(run: ImportedRun) -> None:
    assert series(run, GRAD_NORM) == {11446: 12952.562, 11447: 262623.331, 11448: 254699.302}
    assert series(run, LOSS)[11448] == 7.71234


@check("bigscience_tr8_104b_exp12_spike_divergence_9027")
def _(run: ImportedRun) -> None:
    loss = series(run, LOSS)
    assert loss[8741] == 7.267764 and math.isnan(loss[9027])
    assert series(run, LOSS_MISSING) == {9027: 1.0}
    assert series(run, GRAD_NORM)[8741] == 3273877.676
    assert series(run, LOSS_SCALE)[9027] == 8192.0


@check("bigscience_tr8_104b_exp1_spike_divergence_7010")
def _(run: ImportedRun) -> None:
    assert series(run, LOSS) == {7000: 6.444662, 7010: 11.42026, 7220: 7.155109}
    assert series(run, EVAL_LOSS) == {7000: 7.1742}


@check("bigscience_tr8_104b_exp2_spike_then_nan_6930")
def _(run: ImportedRun) -> None:
    assert series(run, LOSS)[6930] == 9.121927
    assert series(run, GRAD_NORM)[6930] == 283384.13


@check("bigscience_tr8b_104b_bnb_exp6_lr_override_12001")
def _(run: ImportedRun) -> None:
    lr = series(run, LR)
    assert lr[6502] == 5.997e-05 and lr[6503] == 6e-05 and lr[12000] == 5.999e-05 and lr[12001] == 5.842e-05
    assert series(run, GLOBAL_BATCH) == {6502: 80.0, 8600: 160.0, 12000: 528.0}


@check("bigscience_tr8b_104b_embnorm_exp7_overflow_divergence_17062")
def _(run: ImportedRun) -> None:
    assert series(run, LOSS)[17062] == 4.374269
    assert series(run, SKIPPED) == {s: 1.0 for s in (17062, 17063, 17064, 17065, 17067, 17068)}
    assert series(run, LOSS_SCALE)[17068] == 32768.0
    assert sum("OVERFLOW" in ln.text for ln in run.lines) == 6


@check("fairseq_backtranslation_gnorm_explosion_700")
def _(run: ImportedRun) -> None:
    assert series(run, GRAD_NORM) == {695: 55.005, 700: 156.036}
    assert series(run, EVAL_LOSS) == {695: 9.393}
    assert series(run, LOSS_SCALE) == {701: 0.000244140625}  # the printed `loss_scale 0`s are rounding


@check("fairseq_nmt_fp16_loss_scale_collapse_10198")
def _(run: ImportedRun) -> None:
    assert series(run, LOSS_SCALE) == {10198: 0.5, 10199: 0.0001220703125}
    assert series(run, SKIPPED) == {10199: 12.0}
    assert series(run, EVAL_LOSS) == {10198: 8.30118}
    assert "Traceback" in text_of(run)


@check("gptneox_llama_bf16_loss_jump_after_first_update")
def _(run: ImportedRun) -> None:
    assert series(run, LOSS) == {1: 2.275809, 2: 11.05449}
    assert series(run, LR) == {1: 1.212e-09, 2: 2.424e-09}


@check("hf_cpt_feedback_10ep_mild_overfitting")
def _(run: ImportedRun) -> None:
    evals = series(run, EVAL_LOSS)
    assert len(evals) == 10 and min(evals, key=evals.get) == 3294 and evals[3294] == near(0.4853, 1e-3)
    assert len(series(run, LOSS)) == 10


@check("hf_eagle_draft_head_isolated_gradnorm_spikes")
def _(run: ImportedRun) -> None:
    norms = series(run, GRAD_NORM)
    assert len(norms) == 2000 and norms[22360] == near(82.4, 1e-2) and norms[4700] == near(32.9, 1e-2)


@check("hf_llama31_8b_lora_flat_loss_1000steps")
def _(run: ImportedRun) -> None:
    loss = series(run, LOSS)
    assert len(loss) == 100 and loss[10] == near(2.254, 1e-3) and max(loss) == 1000


@check("hf_qwen25_3b_lora_ga16_loss_scale_artifact")
def _(run: ImportedRun) -> None:
    assert series(run, LOSS)[600] == near(5.02, 1e-2)
    assert series(run, EVAL_LOSS)[600] == near(0.304, 1e-2)


@check("hf_tinyllama_lora_healthy_converged")
def _(run: ImportedRun) -> None:
    evals = series(run, EVAL_LOSS)
    assert sorted(evals) == list(range(200, 2801, 200)) and evals[2800] == near(1.122, 1e-3)
    assert run.meta["best_model_checkpoint"].endswith("checkpoint-2800")


@check("hf_tinyllama_lora_repeated_resume_new_data_resets")
def _(run: ImportedRun) -> None:
    norms = series(run, GRAD_NORM)
    assert [s for s, v in norms.items() if math.isnan(v)] == [201, 202, 204, 251]
    assert series(run, LR)[201] == 0.0 and series(run, LOSS)[201] == near(3.025, 1e-3)
    assert sorted(series(run, LOSS)) == list(range(1, 501))


@check("hf_whisper_large_cgn_noisy_eval_late_uptick")
def _(run: ImportedRun) -> None:
    evals = series(run, EVAL_LOSS)
    assert len(evals) == 15 and evals[12000] == near(0.2088, 1e-3)
    assert series(run, "eval/wer")[15000] == near(9.62, 1e-3)


@check("hf_whisper_small_hi_12ep_overfitting")
def _(run: ImportedRun) -> None:
    evals = series(run, EVAL_LOSS)
    assert sorted(evals) == [1000, 2000, 3000, 4000, 5000] and evals[1000] == near(0.3075, 1e-3)
    assert run.meta["best_model_checkpoint"].endswith("checkpoint-4000")
    assert run.meta["summary"]["train_runtime"] == 16800.4503


@check("lightning_slm_stuck_at_unigram_plateau")
def _(run: ImportedRun) -> None:
    loss = series(run, LOSS)
    assert len(loss) == 220 and loss[49] == near(7.68206) and max(loss) == 10999
    assert run.meta["hparams"]["num_epochs"] == 1


@check("lightning_slm_wikitext_10ep_healthy")
def _(run: ImportedRun) -> None:
    evals = series(run, EVAL_LOSS)
    assert len(evals) == 10 and evals[14073] == near(4.132572) and max(evals) == 140739
    assert series(run, "train/loss_epoch")[14073] == near(4.776972)


@check("litgpt_falcon7b_adapter_fp16_true_nan_after_first_step")
def _(run: ImportedRun) -> None:
    loss = series(run, LOSS)
    assert loss[7] == 1.1201 and [s for s, v in loss.items() if math.isnan(v)] == list(range(8, 15))


@check("litgpt_falcon7b_pretrain_loss_frozen")
def _(run: ImportedRun) -> None:
    assert series(run, LOSS) == {1: 11.0666, 400: 11.0666}


@check("llmc_gpt2_124m_fineweb10b_healthy")
def _(run: ImportedRun) -> None:
    assert sorted(series(run, LOSS)) == list(range(19560))
    assert series(run, EVAL_LOSS)[19560] == 3.2722 and series(run, EVAL_LOSS)[0] == 11.0092


@check("megatron_llm_falcon40b_nan_unflagged_3385")
def _(run: ImportedRun) -> None:
    loss = series(run, LOSS)
    assert loss[3384] == 0.7072597 and math.isnan(loss[3385])
    assert series(run, LOSS_MISSING) == {3385: 1.0}
    assert series(run, LR)[3385] == 6.676e-06
    assert len(run.warnings) == 1 and ":3: record cut short" in run.warnings[0]


@check("modded_nanogpt_adam_wsd_healthy")
def _(run: ImportedRun) -> None:
    assert series(run, EVAL_LOSS)[5100] == 3.3406 and series(run, EVAL_LOSS)[0] == 15.9936
    assert not any(math.isnan(p.value) for p in run.points)  # `step_avg:nanms` is not a NaN
    assert sorted(series(run, LOSS)) == list(range(1, 5101))


@check("nanochat_gc_pause_throughput_dips")
def _(run: ImportedRun) -> None:
    dt = series(run, STEP_TIME)
    assert dt[20] == near(1.35044) and dt[19] == near(0.68135)
    assert sum("[GC rank" in ln.text for ln in run.lines) == 6


@check("nanogpt_gpt2_fp16_v100_nan_3010")
def _(run: ImportedRun) -> None:
    loss = series(run, LOSS)
    assert loss[3000] == 4.249 and math.isnan(loss[3010]) and not math.isnan(loss[2990])
    assert series(run, EVAL_LOSS) == {3000: 4.0427}


@check("nemo_style_progress_nccl_watchdog_hang_32040")
def _(run: ImportedRun) -> None:
    assert series(run, LOSS) == {32040: 2.59}
    assert len(run.lines) == 5 and all(ln.step == 32040 and "Watchdog" in ln.text for ln in run.lines)


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_real_run(case: dict) -> None:
    (run,) = read_any(ROOT / case["file"])
    fmt, dialect = FORMATS[case["format"]]
    assert run.format == fmt
    if dialect:
        assert run.meta["dialect"] == dialect
    assert run.points
    CHECKS[case["case"]](run)


def test_every_case_is_checked() -> None:
    assert {c["case"] for c in CASES} == set(CHECKS)


def test_the_whole_folder() -> None:
    runs = read_any(ROOT)
    assert len(runs) == len(CASES)
