"""GPU health from a REAL NVML (issue 'GPU health from NVML'): what the tests check through
`stethoscope.testing.FakeNvml`, checked once against the driver of a lent GPU. Prints PASS/FAIL per
check and exits 1 if any failed; skips (exit 0) without `pynvml` or CUDA. CI has no GPU.

1. `GpuSampler` reads the real device: utilization, temperature, power and its limit, clocks, the
   throttle flags and counters, each within a physical range (a value NVML refuses is left out, not 0).
2. A Monitor with defaults trains a small GPT on the GPU for a few seconds: its sampler thread stores
   the `gpu/*` series in the run, the busy GPU's utilization shows above idle, and no finding at
   warning or above comes of a healthy device.

    python bench/gpu_health_real.py [--seconds 6]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from cuda_paths import report  # noqa: E402  (beside this file: PASS/FAIL lines and the exit status)

RANGES = {  # name -> (low, high): a physical range for a healthy datacenter GPU
    "gpu/util_ratio": (0.0, 1.0), "gpu/mem_util_ratio": (0.0, 1.0), "gpu/temp_c": (10.0, 95.0),
    "gpu/power_w": (10.0, 1500.0), "gpu/power_limit_w": (100.0, 1500.0), "gpu/sm_clock_hz": (1e8, 4e9),
    "gpu/mem_clock_hz": (1e8, 1e10), "gpu/throttle_thermal": (0.0, 0.0), "gpu/throttle_hw_slowdown": (0.0, 0.0),
    "gpu/ecc_uncorrected_total": (0.0, 0.0), "gpu/remap_pending": (0.0, 0.0),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    args = ap.parse_args()
    if importlib.util.find_spec("pynvml") is None:
        print("no pynvml (the `gpu` extra): nothing to check")
        return 0
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 0
    import stethoscope
    from stethoscope.capture.gpu import GpuSampler, open_nvml, visible_devices
    from stethoscope.demo.data import CharData, stdlib_text
    from stethoscope.demo.gpt import GPTConfig, TinyGPT
    from stethoscope.store.query import open_run

    results: list[tuple[str, bool, str]] = []
    nvml = open_nvml()
    results.append(("NVML opens", nvml is not None, "pynvml.nvmlInit"))
    if nvml is None:
        return report(results, torch)
    devices = visible_devices(nvml)
    sampler = GpuSampler(nvml, devices)
    idle = sampler.sample()
    print("one sample, idle:", {k: v for k, v in sorted(idle.items()) if "/gpu" not in k.split("/", 1)[1]})
    for name, (lo, hi) in RANGES.items():
        v = idle.get(name)
        if v is None:
            print(f"  (NVML gives no {name} here: left out)")
            continue
        results.append((f"{name} in [{lo:g}, {hi:g}]", lo <= v <= hi, f"{v:g}"))
    results.append(("per-device names (gpu/temp_c/gpu0)", "gpu/temp_c/gpu0" in idle, f"{len(idle)} values"))
    sampler.close()

    torch.manual_seed(0)
    dev = torch.device("cuda")
    cfg = GPTConfig(n_layer=8, n_embd=512, block_size=256)  # a learnable task: random tokens would not learn
    data = CharData(stdlib_text(), cfg.block_size)
    model = TinyGPT(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    with tempfile.TemporaryDirectory() as d:
        run = Path(d) / "gpu-health"
        mon = stethoscope.Monitor(run, model=model, optimizer=opt, tokens_per_step=32 * cfg.block_size,
                                  system_every=0.5)
        t0, s = time.monotonic(), 0
        while time.monotonic() - t0 < args.seconds:
            x, y, _ = data.batch(32)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                _, loss = model(x.to(dev, non_blocking=True), y.to(dev, non_blocking=True))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            mon.step(s, loss=loss.detach())
            s += 1
        mon.close()
        reader = open_run(run)
        from stethoscope.records import GPU_SERIES

        names = [n for n in GPU_SERIES if reader.series(n)[1]]
        util = reader.series("gpu/util_ratio")
        temp = reader.series("gpu/temp_c")
        power = reader.series("gpu/power_w")
        results.append(("gpu/util_ratio stored while training", len(util[1]) >= 3, f"{len(util[1])} points"))
        busy = max(util[1]) if len(util[1]) else 0.0
        results.append(("the busy GPU shows busy (max util > idle + 0.2)", busy > idle.get("gpu/util_ratio", 0.0) + 0.2,
                        f"max {busy:.2f}, idle {idle.get('gpu/util_ratio')}"))
        results.append(("gpu/temp_c and gpu/power_w stored", len(temp[1]) > 0 and len(power[1]) > 0,
                        f"{len(temp[1])} / {len(power[1])} points; power max {max(power[1]) if len(power[1]) else None}"))
        if names:
            print("gpu series in the run:", ", ".join(sorted(names)))
        reader.close()
        out = subprocess.run([sys.executable, "-m", "stethoscope", "diagnose", str(run), "--json"],
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(SRC)})
        found = json.loads(out.stdout).get("findings", []) if out.returncode in (0, 1) and out.stdout else []
        results.append(("stethoscope diagnose reads the run", out.returncode in (0, 1) and bool(out.stdout),
                        f"rc {out.returncode} {out.stderr.strip()[-200:]}"))
        loud = [f"{f.get('type')}@{f.get('step')}" for f in found
                if f.get("severity") in ("warning", "error", "critical")]
        results.append(("no finding >= warning on a healthy GPU", not loud, ", ".join(loud) or "none"))
        print(f"{s} steps in {args.seconds:g} s")
    return report(results, torch)


if __name__ == "__main__":
    sys.exit(main())
