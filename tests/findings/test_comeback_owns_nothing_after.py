"""A loss spike that took a while to come back is over at its end step: a NaN 70 or 1,500 steps later is an
incident of its own (user-trial-2: `diagnose` printed a NaN that never recovered as a `symptom` of a spike
that had come back, under the spike's name, step and causes)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from stethoscope.cli.main import cli
from stethoscope.findings.incidents import IncidentBook
from stethoscope.records import Finding

# train/loss of a real run (tiny MLP, AdamW 3e-3) from step 398, 4 significant digits: a jump at 444 that
# takes 7 steps to come back (the trend detector's slow comeback, recovered="slowly"); NaN from step 519 on
LOSS = """0.02921 0.008926 0.04208 0.01648 0.02311 0.02564 0.02265 0.03621 0.07134 0.02247 0.02183 0.01914 0.04475
0.0111 0.0198 0.08654 0.05598 0.03232 0.0574 0.0202 0.04334 0.02836 0.02876 0.02565 0.02495 0.09029 0.0331
0.03968 0.1604 0.03164 0.02324 0.02825 0.01819 0.02491 0.02478 0.01767 0.07969 0.01676 0.01981 0.02134 0.02677
0.02461 0.1301 0.04977 0.02904 0.03104 0.06757 0.1225 0.03838 0.04233 0.01994 0.01577 0.01821 0.01619 0.01451
0.04631 0.05811 0.01892 0.08907 0.01749 0.04973 0.01471 0.03106 0.02087 0.04254 0.01489 0.02045 0.04711
0.01033 0.04102 0.03668 0.04098 0.02504 0.0942 0.08141 0.0289 0.01221 0.04491 0.01889 0.04168 0.0251 0.03424
0.02919 0.01528 0.05901 0.01346 0.03355 0.01123 0.08178 0.02165 0.02381 0.01671 0.03734 0.01807 0.04203
0.01716 0.03852 0.03926 0.1386 0.0135 0.07464 0.04833 0.01807 0.01654 0.07297 0.03229 0.03177 0.1042 0.02601
0.02123 0.04882 0.01764 0.02769 0.01525 0.04565 0.03251 0.05793 0.01477 0.06428 0.02 0.01816"""


def test_a_slow_comeback_closes_its_incident():
    book = IncidentBook(lead_steps=50)
    spike = Finding("loss_spike", "warning", 444, "loss jumped at step 444 and took 7 steps to come back",
                    end_step=451, evidence={"recovered": "slowly"}, source="trend")
    (out,) = book.process([spike])
    assert out.type == "loss_spike" and out.severity == "warning"
    nan = Finding("nan", "critical", 2000, "non-finite train/loss at step 2000", source="nonfinite")
    assert book.process([nan]) == [nan]  # news of its own, not a symptom of the spike


def test_diagnose_names_the_nan_not_the_spike_it_followed(tmp_path):
    values = LOSS.split()
    assert "0.1225" in values  # the jump the test is about
    log = tmp_path / "train.csv"
    rows = [f"{398 + i},{v}" for i, v in enumerate(values)]
    rows += [f"{s},nan" for s in range(398 + len(values), 600)]
    log.write_text("step,loss\n" + "\n".join(rows) + "\n")
    result = CliRunner().invoke(cli, ["diagnose", str(log), "--json", "--min-severity", "info"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)["findings"]
    worst = found[0]
    assert (worst["type"], worst["severity"], worst["step"]) == ("nan", "critical", 398 + len(values))
    spikes = [f for f in found if f["type"] == "loss_spike" and f["step"] == 444]
    assert spikes and all(f["severity"] != "critical" and "nan" not in f["message"] for f in spikes)
