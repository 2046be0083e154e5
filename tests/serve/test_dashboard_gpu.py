"""The dashboard's GPU panels: NVML series of every device on one chart, and a GPU panel per rank."""

from __future__ import annotations

import json
import time

from stethoscope import Monitor
from stethoscope import records as R
from stethoscope.serve.dashboard import App
from stethoscope.serve.http import Server
from stethoscope.testing import FakeGpu, FakeNvml
from tests.serve.test_dashboard_api import _json


def _gpu_run(path, ranks=2):
    for rank in range(ranks):
        nvml = FakeNvml([FakeGpu(temp=60.0 + rank), FakeGpu(temp=70.0 + rank, util=40.0)])
        with Monitor(path, rank=rank, world_size=ranks, gpu_health=nvml, system_every=0.02, serve=False) as mon:
            for step in range(30):
                mon.step(step, loss=2.0 - step / 100)
                time.sleep(0.01)


def test_gpu_charts_have_a_line_per_device_and_a_panel_per_rank(tmp_path):
    _gpu_run(tmp_path / "g")
    srv = Server(App([tmp_path / "g"]))
    srv.start()
    try:
        d = _json(srv, "/api/curves?run=g")
    finally:
        srv.shutdown()
        srv.server_close()
    charts = {c["id"]: c for c in d["charts"]}
    temp = charts["gpu_temp"]
    lines = {t["metric"]: t for t in temp["traces"]}
    assert {f"{R.GPU_TEMP}/gpu0", f"{R.GPU_TEMP}/gpu1"} <= set(lines)
    assert R.GPU_TEMP not in lines  # device 0's plain-named copy is not drawn twice
    assert set(lines[f"{R.GPU_TEMP}/gpu1"]["y"]) == {70.0}
    assert "gpu_throttle" in charts and "gpu" in charts
    assert not [c for c in d["charts"] if c["id"].startswith("other-") and c["title"].startswith("gpu/")]
    per_rank = charts[f"rank-{R.GPU_UTIL}"]
    assert [t["rank"] for t in per_rank["traces"]] == [0, 1]
    status, _, body = App([tmp_path / "g"]).handle("GET", "/api/runs", {})
    assert status == 200 and json.loads(body)["runs"][0]["ranks"] == 2
