"""Prometheus: the real /metrics endpoint scraped over HTTP; the alert rules and Grafana dashboard."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest

from stethoscope.exporters.prometheus import metric_name
from stethoscope.records import UNITS
from tests.conftest import run_cli
from tests.exporters.conftest import STEPS, cli, loss_at, record

parser = pytest.importorskip("prometheus_client.parser")
yaml = pytest.importorskip("yaml")


def _scrape(url: str) -> dict:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def _value(families: dict, name: str, **labels) -> float:
    samples = [s for s in families[name].samples if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(samples) == 1, samples
    return samples[0].value


def test_each_rank_serves_vital_signs_and_finding_counters(tmp_path):
    mon = record(tmp_path / "exp1", prometheus_port=0)
    mon.step(STEPS, loss=1.25, grad_norm=0.5)
    mon.flush()
    url = next(e.url for e in mon.exports.exporters if getattr(e, "url", None))
    assert url.startswith("http://127.0.0.1:")  # loopback by default
    families = _scrape(url)
    labels = {"run": "exp1", "rank": "0"}
    assert _value(families, "stethoscope_train_loss", **labels) == 1.25
    assert _value(families, "stethoscope_grad_norm", **labels) == 0.5
    assert _value(families, "stethoscope_opt_lr", **labels) == pytest.approx(1e-3 * (1 - (STEPS - 1) / STEPS))
    assert _value(families, "stethoscope_eval_loss", **labels) == 2.5
    assert _value(families, "stethoscope_step", **labels) == STEPS
    assert _value(families, "stethoscope_memory_rss_bytes", **labels) > 2**20  # base units: bytes, not GiB
    assert families["stethoscope_findings"].type == "counter"
    assert _value(families, "stethoscope_findings", type="nan", severity="critical", **labels) == 1
    assert "(recorded in GiB)" in families["stethoscope_memory_rss_bytes"].documentation
    assert not [n for n in families if re.search(r"_(gib|ms|pct|per_s|s)$", n)], sorted(families)
    from stethoscope.store.query import open_run

    with open_run(tmp_path / "exp1") as run:
        assert run.meta()["prometheus_url"] == url
    assert mon.exports.prometheus_url == url
    assert json.loads((tmp_path / "exp1" / "run.json").read_text())["prometheus_url"] == url
    mon.close()
    with pytest.raises(urllib.error.URLError):  # the server went with the Monitor
        urllib.request.urlopen(url, timeout=2)


def test_names_follow_prometheus_base_units_and_devices_are_a_gpu_label():
    from stethoscope.exporters.prometheus import exported

    assert exported("memory/rss_gib") == ("stethoscope_memory_rss_bytes", 2.0**30, None)
    assert exported("perf/step_time_s") == ("stethoscope_perf_step_time_seconds", 1.0, None)
    assert exported("eval/time_(ms)") == ("stethoscope_eval_time_seconds", 1e-3, None)
    assert exported("system/cpu_pct") == ("stethoscope_system_cpu_ratio", 1e-2, None)
    assert exported("perf/tokens_per_s") == ("stethoscope_perf_tokens_per_second", 1.0, None)
    assert exported("perf/mfu") == ("stethoscope_perf_mfu_ratio", 1.0, None)
    assert exported("gpu/temp_c/gpu3") == ("stethoscope_gpu_temp_celsius", 1.0, "3")
    assert exported("gpu/sm_clock_hz") == ("stethoscope_gpu_sm_clock_hertz", 1.0, None)
    assert exported("memory/cuda_reserved_gib/cuda1") == ("stethoscope_memory_cuda_reserved_bytes", 2.0**30, "1")


def test_gpu_health_is_served_per_device_like_dcgm(tmp_path, capfd):
    pytest.importorskip("torch")
    import time

    from stethoscope import Monitor
    from stethoscope.testing import FakeGpu, FakeNvml

    nvml = FakeNvml([FakeGpu(), FakeGpu(temp=80.0, ecc_corrected=3)])
    with Monitor(tmp_path / "g", gpu_health=nvml, system_every=0.02, prometheus_port=0, serve=False) as mon:
        for step in range(5):
            mon.step(step, loss=1.0)
            time.sleep(0.05)
        mon.flush()
        families = _scrape(mon.exports.prometheus_url)
    assert f"Prometheus metrics of rank 0 at {mon.exports.prometheus_url}" in capfd.readouterr().err
    temps = {s.labels["gpu"]: s.value for s in families["stethoscope_gpu_temp_celsius"].samples}
    assert temps == {"0": 64.0, "1": 80.0}  # one metric, a gpu label: no second copy without the label
    assert _value(families, "stethoscope_gpu_power_watts", gpu="0", run="g", rank="0") == 550.0
    assert families["stethoscope_gpu_ecc_corrected"].type == "counter"
    assert _value(families, "stethoscope_gpu_ecc_corrected", gpu="1", run="g", rank="0") == 3


def test_nan_is_served_as_nan(tmp_path):
    mon = record(tmp_path / "exp1", prometheus_port=0)
    mon.flush()
    url = next(e.url for e in mon.exports.exporters if getattr(e, "url", None))
    value = _value(_scrape(url), "stethoscope_train_loss", run="exp1", rank="0")
    mon.close()
    assert value != value and loss_at(STEPS - 1) != loss_at(STEPS - 1)


def _served_names() -> set[str]:
    names = {metric_name(n) for n in UNITS} | {metric_name(n) for n in ("grad/clip_coef", "update/ratio",
                                                                         "amp/loss_scale", "perf/data_wait_s")}
    return names | {"stethoscope_step", "stethoscope_last_step_timestamp_seconds", "stethoscope_findings_total"}


def _names_in(expr: str) -> set[str]:
    return set(re.findall(r"\bstethoscope_[a-z0-9_]+", expr))


def test_prometheus_rules_carry_the_detector_thresholds(tmp_path):
    (tmp_path / "exp1").mkdir()
    out = tmp_path / "rules.yml"
    res = cli("export", "prometheus-rules", str(tmp_path / "exp1"), "-o", str(out),
                  "--set", "loss_spike_warn_rel=0.5", "--set", "grad_norm_ceiling=100")
    assert res.exit_code == 0, res.stderr
    doc = yaml.safe_load(out.read_text())
    (group,) = doc["groups"]
    rules = {r["alert"]: r for r in group["rules"]}
    assert len(rules) == len(group["rules"]) >= 15
    for rule in group["rules"]:
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}
        assert rule["labels"]["severity"] in ("info", "warning", "error", "critical", "{{ $labels.severity }}")
        assert re.fullmatch(r"\d+[smh]", rule["for"]) and rule["annotations"]["summary"]
        assert rule["expr"].count("(") == rule["expr"].count(")") and rule["expr"].count("[") == rule["expr"].count("]")
        assert _names_in(rule["expr"]) <= _served_names(), rule["expr"]
        assert 'run="exp1"' in rule["expr"]
    assert "1.5 * quantile_over_time(0.5, stethoscope_train_loss" in rules["StethoscopeLossSpike"]["expr"]
    assert rules["StethoscopeGradNormCeiling"]["expr"] == 'stethoscope_grad_norm{run="exp1"} > 100'
    assert "> 10 *" in rules["StethoscopeGradExplosion"]["expr"]  # the default grad_explosion_ratio
    res = cli("export", "prometheus-rules", "--format", "json")
    assert res.exit_code == 0 and "run=" not in res.stdout
    assert json.loads(res.stdout)["groups"][0]["name"] == "stethoscope"


def test_bad_rule_options_are_one_line(cli_env):
    res = run_cli("export", "prometheus-rules", "--window", "ten minutes", env=cli_env)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--window" in res.stderr
    res = run_cli("export", "prometheus-rules", "--set", "spike_sigmaa=3", env=cli_env)
    assert res.returncode == 2 and "spike_sigma" in res.stderr and "Traceback" not in res.stderr


def test_grafana_dashboard_queries_what_the_ranks_serve(tmp_path):
    out = tmp_path / "dash.json"
    res = cli("export", "grafana", "-o", str(out), "--title", "LLM runs")
    assert res.exit_code == 0, res.stderr
    dash = json.loads(out.read_text())
    assert dash["title"] == "LLM runs" and dash["uid"] and dash["schemaVersion"] >= 30
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource", "run", "rank"}
    titles = [p["title"] for p in dash["panels"]]
    assert {"Loss", "Gradient norm (pre-clip)", "Learning rate", "Tokens/s", "MFU", "Memory", "Step time",
            "Findings raised"} <= set(titles)
    cells = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        cell = (g["x"], g["y"])
        assert cell not in cells and g["x"] + g["w"] <= 24  # no two panels on one spot
        cells.add(cell)
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"]) > 0
        for t in p["targets"]:
            assert '$run' in t["expr"] and _names_in(t["expr"]) <= _served_names(), t["expr"]
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
