"""Rules: one alert per incident, routed by severity, escalated, resolved, stopped, and resumable."""

from __future__ import annotations

import pytest

from stethoscope.act import AlertRules, RuleConfig
from stethoscope.records import Finding
from stethoscope.testing import FakeClock


def _nan(step=200, **kw) -> Finding:
    return Finding("nan", "critical", step, f"non-finite train/loss at step {step}", source="nonfinite", **kw)


def _rules(*severities, **config) -> AlertRules:
    return AlertRules(list(severities) or ["warning"], RuleConfig(**config), rank=3, run_dir="/runs/exp1")


def _kinds(deliveries):
    return [(ch, a.kind, a.severity) for ch, a in deliveries]


def test_one_trigger_per_incident_then_one_final_message():
    rules, clock = _rules("warning", "error"), FakeClock()
    assert _kinds(rules.on_findings([_nan()], clock())) == [(0, "trigger", "critical"), (1, "trigger", "critical")]
    for step in range(201, 500):  # the same incident again and again (a detector that repeats itself)
        clock.advance(1.0)
        assert rules.on_findings([_nan(step)], clock()) == [] and rules.tick(clock()) == []
    final = rules.run_ended("completed", 499, clock())
    assert _kinds(final) == [(0, "stop", "critical"), (1, "stop", "critical")]
    assert "the run stopped (completed) at step 499" in final[0][1].note
    assert final[0][1].key == final[1][1].key and final[0][1].key.endswith("exp1-16116f45/nan@200")


def test_a_recovered_follow_up_resolves_on_the_channels_that_were_paged():
    rules, clock = _rules("warning", "critical"), FakeClock()
    warn = Finding("loss_spike", "warning", 300, "loss spike", source="spike")
    assert _kinds(rules.on_findings([warn], clock())) == [(0, "trigger", "warning")]
    done = Finding("loss_spike", "warning", 300, "loss spike; recovered", end_step=340, source="spike",
                   evidence={"recovered": True})
    [(ch, alert)] = rules.on_findings([done], clock())
    assert (ch, alert.kind, alert.note) == (0, "resolve", "resolved at step 340")
    assert rules.run_ended("completed", 900, clock()) == []


def test_an_alert_resolves_when_every_finding_in_it_is_over_and_a_passing_blip_resolves_too():
    rules, clock = _rules(), FakeClock()
    drop = Finding("throughput_drop", "warning", 20, "slower", source="throughput")
    again = Finding("throughput_drop", "warning", 90, "slower again", source="throughput")
    assert len(rules.on_findings([drop], clock())) == 1 and rules.on_findings([again], clock()) == []
    blip = Finding("throughput_drop", "info", 20, "slower; back to normal", end_step=24, source="throughput",
                   evidence={"transient": True})
    assert rules.on_findings([blip], clock()) == []  # the one from step 90 is still on
    over = Finding("throughput_drop", "warning", 90, "slower again", end_step=140, source="throughput",
                   evidence={"recovered": True})
    [(_, alert)] = rules.on_findings([over], clock())
    assert alert.kind == "resolve" and alert.note == "resolved at step 140"
    rules.on_findings([Finding("periodic_stall", "warning", 5, "stall", source="throughput")], clock())
    [(_, alert)] = rules.on_findings([Finding("periodic_stall", "info", 5, "x", end_step=9, source="throughput",
                                              evidence={"transient": True})], clock())
    assert alert.note == "over by step 9: it passed (transient)"


def test_a_channel_only_hears_of_what_reaches_its_severity_and_escalation_adds_it():
    rules, clock = _rules("warning", "error"), FakeClock()
    spike = Finding("loss_spike", "warning", 300, "loss spike", source="spike")
    assert _kinds(rules.on_findings([spike], clock())) == [(0, "trigger", "warning")]
    worse = Finding("loss_spike", "error", 300, "loss spike, now with a grad explosion", source="spike")
    # channel 1 hears of it for the first time: a trigger (an `escalate` for a key it never saw pages nobody)
    assert _kinds(rules.on_findings([worse], clock())) == [(0, "escalate", "error"), (1, "trigger", "error")]
    assert _kinds(rules.run_ended("failed", 400, clock())) == [(0, "stop", "error"), (1, "stop", "error")]


def test_an_incident_that_persists_is_escalated_one_level_after_escalate_after_s():
    rules, clock = _rules("warning", "critical", escalate_after_s=600), FakeClock()
    slow = Finding("throughput_drop", "error", 100, "tokens/s down 30%", source="throughput")
    assert _kinds(rules.on_findings([slow], clock())) == [(0, "trigger", "error")]
    clock.advance(599)
    assert rules.tick(clock()) == []
    clock.advance(2)
    [(c0, a0), (c1, a1)] = rules.tick(clock())
    assert (c0, a0.kind, a0.severity, c1) == (0, "escalate", "critical", 1) and "still open after 10 min" in a0.note
    clock.advance(5000)
    assert rules.tick(clock()) == []  # critical is the top: nothing further


def test_cooldown_counts_a_new_incident_of_a_type_instead_of_paging():
    rules, clock = _rules(cooldown_s=600), FakeClock()
    first = Finding("loss_spike", "warning", 100, "spike", source="spike")
    rules.on_findings([first], clock())
    rules.on_findings([Finding("loss_spike", "warning", 100, "spike over", end_step=120, source="spike",
                               evidence={"recovered": True})], clock())
    clock.advance(60)
    assert rules.on_findings([Finding("loss_spike", "warning", 500, "spike", source="spike")], clock()) == []
    assert rules.suppressed == 1
    clock.advance(600)
    assert _kinds(rules.on_findings([Finding("loss_spike", "warning", 900, "spike", source="spike")], clock())) == \
        [(0, "trigger", "warning")]


def test_below_the_floor_nothing_is_sent():
    rules = _rules(min_severity="error")
    assert rules.on_findings([Finding("plateau", "warning", 10, "plateau", source="trend")], 0.0) == []
    assert rules.on_findings([Finding("grad_spike", "info", 10, "blip", source="spike")], 0.0) == []


def test_a_root_that_claims_an_alerted_symptom_updates_that_alert_and_does_not_page_again():
    rules, clock = _rules(), FakeClock()
    nan = _nan(610)
    assert len(rules.on_findings([nan], clock())) == 1
    withdrawn = Finding("nan", "critical", 610, nan.message, source="nonfinite",
                        evidence={"withdrawn": True, "folded_into": "trend|divergence|602"})
    root = Finding("divergence", "critical", 602, "divergence from 602; symptoms: nan at 610", source="trend",
                   symptoms=[{"type": "nan", "step": 610}])
    assert rules.on_findings([withdrawn, root], clock()) == []
    over = Finding("divergence", "critical", 602, "divergence; recovered", end_step=900, source="trend",
                   evidence={"recovered": "fully"})
    [(_, alert)] = rules.on_findings([over], clock())
    assert alert.kind == "resolve" and alert.type == "divergence" and alert.key.endswith("exp1-16116f45/nan@610")


def test_state_dict_keeps_a_resumed_run_from_paging_again():
    rules, clock = _rules(), FakeClock()
    rules.on_findings([_nan(200)], clock())
    resumed = _rules()
    resumed.load_state_dict(rules.state_dict())
    clock.advance(30)
    assert resumed.on_findings([_nan(260)], clock()) == []  # the detectors restarted and found it again
    assert _kinds(resumed.run_ended("completed", 300, clock())) == [(0, "stop", "critical")]


def test_alert_content_names_what_when_where_why_and_what_to_do():
    def advise(f):
        f.causes, f.fixes = ["LR too high"], ["roll back, lower the LR"]
        return f

    rules = AlertRules(["warning"], rank=3, run_dir="/runs/exp1", advise=advise)
    f = _nan(200, evidence={"series": ["train/loss"], "count": 1, "values": {"train/loss": "nan"}})
    [(_, a)] = rules.on_findings([f], 1_800_000_000.0, lambda step: 1_799_999_990.0)
    text = a.text()
    for part in ("[CRITICAL] nan at step 200 on rank 3 (/runs/exp1)", "since: step 200, 2027-01-15",
                 "numbers: series=train/loss, count=1, values=train/loss nan", "likely cause: LR too high",
                 "first fix: roll back, lower the LR", "look: stethoscope diagnose /runs/exp1"):
        assert part in text, (part, text)
    assert a.key.endswith("exp1-16116f45/nan@200") and a.key.startswith("stethoscope/exp1-")


@pytest.mark.parametrize("bad", [dict(min_severity="loud"), dict(cooldown_s=-1), dict(escalate_after_s=0)])
def test_rule_config_is_validated(bad):
    with pytest.raises(ValueError, match="rules."):
        RuleConfig(**bad)


def test_a_channel_that_escalates_by_itself_gets_no_escalate_but_a_trigger_when_first_reached():
    rules = AlertRules(["warning", "error", "critical"], RuleConfig(escalate_after_s=600),
                       escalates_itself=[False, True, True])
    clock = FakeClock()
    slow = Finding("throughput_drop", "error", 100, "tokens/s down 30%", source="throughput")
    assert _kinds(rules.on_findings([slow], clock())) == [(0, "trigger", "error"), (1, "trigger", "error")]
    clock.advance(601)
    [(c0, a0), (c2, a2)] = rules.tick(clock())  # channel 1 (PagerDuty-like): its own policy escalates
    assert (c0, a0.kind, c2, a2.kind, a2.severity) == (0, "escalate", 2, "trigger", "critical")
    assert a2.note == "escalated: still open after 10 min"
    assert _kinds(rules.run_ended("failed", 400, clock())) == [(0, "stop", "critical"), (1, "stop", "critical"),
                                                             (2, "stop", "critical")]


def test_a_critical_incident_after_a_resolve_pages_despite_the_cooldown():
    rules, clock = _rules(cooldown_s=600), FakeClock()
    assert len(rules.on_findings([_nan(50)], clock())) == 1
    over = _nan(50, end_step=59, evidence={"recovered": True})
    assert _kinds(rules.on_findings([over], clock())) == [(0, "resolve", "critical")]
    clock.advance(10)
    [(_, again)] = rules.on_findings([_nan(100)], clock())  # told "resolved" 10 s ago: the NaN is news
    assert (again.kind, again.step) == ("trigger", 100) and rules.suppressed == 0


def test_a_nan_flapping_inside_the_cooldown_pages_once_more_then_is_counted():
    rules, clock = _rules(cooldown_s=600), FakeClock()
    paged = []
    for burst in range(6):  # a NaN for 5 steps, back to finite, again 25 steps later: every 25 s
        start = 50 + 25 * burst
        paged += [a for _, a in rules.on_findings([_nan(start)], clock()) if a.kind == "trigger"]
        clock.advance(5)
        rules.on_findings([_nan(start, end_step=start + 5, evidence={"recovered": True})], clock())
        clock.advance(20)
    assert [a.step for a in paged] == [50, 75]  # the first, and once "it is back"; the rest counted
    assert rules.suppressed >= 4
    clock.advance(600)
    assert [a.kind for _, a in rules.on_findings([_nan(900)], clock())] == ["trigger"]  # the cooldown passed


def test_a_run_wide_hang_pages_once_across_ranks_and_the_paging_rank_resolves_it(tmp_path):
    ranks = [AlertRules(["warning"], RuleConfig(), rank=r, run_dir=str(tmp_path)) for r in (0, 1, 2)]
    clock = FakeClock()

    def hang(rank, step, since=None, evidence=None, **kw):  # the ranks stalled 0.3 s apart
        ev = {"since": 1000.0 + 0.3 * rank if since is None else since, "timeout_s": 60.0, **(evidence or {})}
        return Finding("hang", "critical", step, f"rank {rank}: no step completed", source="watchdog", evidence=ev,
                       **kw)

    sent = [r.on_findings([hang(i, 14 if i < 2 else 15)], clock()) for i, r in enumerate(ranks)]
    assert [len(d) for d in sent] == [1, 0, 0]  # rank 2 stalled a step later: the same incident
    assert "/r0/" not in sent[0][0][1].key and sent[0][0][1].key.endswith("/hang@14")
    done = [r.on_findings([hang(i, 14, end_step=15, evidence={"recovered": True})], clock())
            for i, r in enumerate(ranks[:2])]
    assert _kinds(done[0]) == [(0, "resolve", "critical")] and done[1] == []
    assert ranks[1].run_ended("completed", 30, clock()) == []  # nothing was paged from rank 1
    assert ranks[2].run_ended("completed", 30, clock()) == []
    restarted = [AlertRules(["warning"], RuleConfig(), rank=r, run_dir=str(tmp_path)) for r in (0, 1)]
    again = [r.on_findings([hang(i, 14, since=5000.0 + i)], clock()) for i, r in enumerate(restarted)]
    assert [len(d) for d in again] == [1, 0]  # the same step stalled again an hour later: a new incident, one page


def test_a_nan_on_every_rank_pages_once(tmp_path):
    """user-trial-2: torchrun on gloo, a NaN at step 100 (every rank's after the gradient all-reduce): the webhook
    got '[CRITICAL] nan at step 100 on rank 0', the same on rank 1, and a '[RUN STOPPED]' from each."""
    ranks = [AlertRules(["warning"], RuleConfig(), rank=r, run_dir=str(tmp_path)) for r in (0, 1)]
    clock = FakeClock()
    sent = [r.on_findings([_nan(100 + i)], clock(), onset_time=lambda step: 5000.0 + step) for i, r in enumerate(ranks)]
    assert [len(d) for d in sent] == [1, 0]  # rank 1 saw it a step later: the same incident
    assert "/r0/" not in sent[0][0][1].key
    ended = [r.run_ended("completed", 199, clock()) for r in ranks]
    assert _kinds(ended[0]) == [(0, "stop", "critical")] and ended[1] == []
    later = ranks[1].on_findings([_nan(900)], clock(), onset_time=lambda step: 5000.0 + step)
    assert len(later) == 1  # a NaN 800 steps (and seconds) later is a new incident: it pages


def test_a_nan_back_on_the_same_rank_after_its_incident_closed_pages_again(tmp_path):
    """Its own claim file is no other rank's page: a NaN back at the step a rollback returned to, a few seconds
    later, is this rank's rules' call (they closed the first incident)."""
    rules, clock = AlertRules(["warning"], RuleConfig(), rank=0, run_dir=str(tmp_path)), FakeClock()
    assert len(rules.on_findings([_nan(100)], clock(), onset_time=lambda step: 5000.0)) == 1
    over = _nan(100, end_step=101, evidence={"recovered": True})
    assert _kinds(rules.on_findings([over], clock())) == [(0, "resolve", "critical")]
    again = rules.on_findings([_nan(101)], clock(), onset_time=lambda step: 5010.0)
    assert _kinds(again) == [(0, "trigger", "critical")]
