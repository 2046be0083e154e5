"""GPU health from NVML: the real sampler, Monitor, store, detectors and diagnosis, with NVML faked
at the library boundary (`stethoscope.testing.FakeNvml` in place of the `pynvml` module)."""

from __future__ import annotations

import json
import time

import pytest

torch = pytest.importorskip("torch")

from stethoscope import Monitor  # noqa: E402
from stethoscope import records as R  # noqa: E402
from stethoscope.capture.gpu import GpuSampler, open_nvml, visible_devices  # noqa: E402
from stethoscope.store.query import open_run  # noqa: E402
from stethoscope.testing import FakeGpu, FakeNvml  # noqa: E402
from tests.conftest import run_cli  # noqa: E402

THERMAL_HW = 0x40


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


def _train(run_dir, nvml, steps, at_step=None, pause=0.0, slow=None, **options):
    """A real tiny training loop; `at_step(step, nvml)` changes the fake GPU while it trains; `slow`
    (start, end, seconds) makes those steps take longer, as a throttled GPU would."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    with Monitor(run_dir, model=model, optimizer=opt, gpu_health=nvml, system_every=0.02, strict=True,
                 serve=False, **options) as mon:
        for step in range(steps):
            if at_step is not None:
                at_step(step, nvml)
            x = torch.randn(32, 8, generator=g)
            loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            extra = slow[2] if slow and slow[0] <= step < slow[1] else 0.0
            time.sleep(pause + extra)
            mon.step(step, loss=loss)
    return mon


def test_series_land_in_the_store_with_units_and_only_off_the_training_thread(tmp_path):
    nvml = FakeNvml([FakeGpu(), FakeGpu(temp=71.0, power_mw=610_000.0)])
    _train(tmp_path, nvml, 60, pause=0.004)
    with open_run(tmp_path) as r:
        units = dict(r.query("SELECT name, unit FROM series")[1])
        _, util = r.series(R.GPU_UTIL)
        _, temp1 = r.series(f"{R.GPU_TEMP}/gpu1")
        _, power = r.series(R.GPU_POWER)
        _, clock = r.series(R.GPU_SM_CLOCK)
    assert units[R.GPU_UTIL] == "ratio" and units[f"{R.GPU_TEMP}/gpu1"] == "°C" and units[R.GPU_POWER] == "W"
    assert units[R.GPU_SM_CLOCK] == "Hz" and units[R.GPU_ECC_UNCORRECTED] == "errors"
    assert util and set(util) == {0.92}
    assert set(temp1) == {71.0} and set(power) == {550.0}  # mW -> W; device 0 under the plain name
    assert set(clock) == {1.98e9}  # MHz -> Hz
    assert nvml.threads["stethoscope-gpu"] > 0
    assert "MainThread" not in nvml.threads, f"NVML was called on the training thread: {dict(nvml.threads)}"


def test_no_nvml_records_nothing_and_raises_nothing(tmp_path):
    mon = _train(tmp_path / "a", FakeNvml(no_gpu=True), 20)
    assert mon.errors == 0
    mon = _train(tmp_path / "b", True, 20)  # the real pynvml when installed: no driver on this machine
    assert mon.errors == 0
    for run in ("a", "b"):
        with open_run(tmp_path / run) as r:
            names = [n for (n,) in r.query("SELECT name FROM series")[1]]
        assert "train/loss" in names and not [n for n in names if n.startswith("gpu/")]


def test_a_query_the_board_does_not_support_is_skipped_and_not_asked_again():
    nvml = FakeNvml(unsupported=["nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRemappedRows"])
    sampler = GpuSampler(open_nvml(nvml), visible_devices(nvml, env=""))
    first, second = sampler.sample(), sampler.sample()
    assert R.GPU_ECC_UNCORRECTED not in first and R.GPU_TEMP in first and first == second
    assert R.GPU_ROWS_PENDING in first  # the retired-pages query answers where row remapping does not


def test_cuda_visible_devices_picks_the_rank_s_gpus_by_index_or_uuid():
    nvml = FakeNvml([FakeGpu(temp=50.0 + i) for i in range(4)])
    open_nvml(nvml)
    assert [h for _, h in visible_devices(nvml, env="2,3")] == [2, 3]
    uuid = nvml.gpus[3].uuid
    devices = visible_devices(nvml, env=uuid)
    assert devices == [(0, 3)]
    assert GpuSampler(nvml, devices).sample()[R.GPU_TEMP] == 53.0  # the rank's cuda:0 is physical GPU 3


def _diagnose(run_dir, cli_env):
    res = run_cli("diagnose", str(run_dir), "--json", "--min-severity", "info", env=cli_env)
    assert res.returncode in (0, 1), res.stderr
    return json.loads(res.stdout)


def _findings(report):
    runs = report if isinstance(report, list) else [report]
    return [f for run in runs for f in run.get("findings", [])]


def test_an_uncorrectable_ecc_error_is_critical_and_names_the_device(tmp_path, cli_env):
    nvml = FakeNvml([FakeGpu(), FakeGpu()])

    def ecc(step, nvml):
        if step == 40:
            nvml.gpus[1].ecc_uncorrected = 2
            nvml.xid(1, 79)

    _train(tmp_path, nvml, 80, at_step=ecc, pause=0.004)
    found = _findings(_diagnose(tmp_path, cli_env))
    ecc_f = [f for f in found if f["type"] == "gpu_ecc_error"]
    xid_f = [f for f in found if f["type"] == "gpu_xid"]
    assert ecc_f and ecc_f[0]["severity"] == "critical" and "GPU 1" in ecc_f[0]["message"]
    assert 39 <= ecc_f[0]["step"] <= 79  # sampled while step 40 trains: stamped with the last step done
    assert xid_f and xid_f[0]["severity"] == "critical" and "XID 79" in xid_f[0]["message"]
    assert "GPU 1" in xid_f[0]["message"]


def test_a_throttle_episode_is_named_as_the_cause_of_the_throughput_drop_it_made(tmp_path, cli_env):
    nvml = FakeNvml()

    def heat(step, nvml):
        hot = 200 <= step < 320
        nvml.gpus[0].reasons = THERMAL_HW if hot else 0
        nvml.gpus[0].temp = 91.0 if hot else 64.0
        nvml.gpus[0].sm_mhz = 1100.0 if hot else 1980.0

    # 6x slower while hot: a loaded test machine's jitter cannot hide the drop or move it out of the episode
    _train(tmp_path, nvml, 400, at_step=heat, pause=0.006, slow=(200, 320, 0.030), tokens_per_step=1024)
    found = _findings(_diagnose(tmp_path, cli_env))
    throttle = [f for f in found if f["type"] == "gpu_throttle"]
    assert throttle and "thermal" in throttle[0]["message"] and "91 °C" in throttle[0]["message"]
    drops = [f for f in found if f["type"] in ("throughput_drop", "periodic_stall")
             and f["step"] is not None and 190 <= f["step"] <= 330]
    assert drops, [(f["type"], f["step"]) for f in found]
    # the drop the episode made names it (a busy machine may add a stall of its own beside it)
    assert any(d["causes"] and d["causes"][0].startswith("GPU 0 throttled (thermal)") for d in drops), drops


def test_low_utilization_with_data_waits_names_an_input_bound_run(tmp_path, cli_env):
    nvml = FakeNvml([FakeGpu(util=22.0)])
    _train(tmp_path, nvml, 200, pause=0.01)
    found = _findings(_diagnose(tmp_path, cli_env))
    under = [f for f in found if f["type"] == "gpu_underused"]
    assert under and "22%" in under[0]["message"]
    assert "bound" in under[0]["message"]


def test_an_ecc_error_pages_once_naming_the_device(tmp_path):
    from stethoscope.act import AlertsConfig, MemoryChannel, RuleConfig

    mem = MemoryChannel()
    nvml = FakeNvml([FakeGpu(), FakeGpu()])

    def ecc(step, nvml):
        if step == 30:
            nvml.gpus[1].ecc_uncorrected = 1

    _train(tmp_path, nvml, 70, at_step=ecc, pause=0.004, alerts=AlertsConfig([mem], RuleConfig(cooldown_s=0)))
    pages = [a for a in mem.sent if a.type == "gpu_ecc_error"]
    assert len([a for a in pages if a.kind == "trigger"]) == 1, [(a.type, a.kind) for a in mem.sent]
    assert pages[0].severity == "critical" and "GPU 1" in pages[0].message
