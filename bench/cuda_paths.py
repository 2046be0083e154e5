"""The Monitor's GPU code paths on a real GPU: CUDA memory series, the fused grad norm on the device,
no per-step host sync, AMP loss scale, and a diagnosis of the run it wrote. Prints PASS/FAIL per check
and exits 1 if any failed; skips (exit 0) without CUDA. CI has no GPU: run it where one is lent.

    python bench/cuda_paths.py [--steps 300]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main() -> int:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 0
    import stethoscope
    from stethoscope.demo.gpt import GPTConfig, TinyGPT
    from stethoscope.diagnose.engine import diagnose_records
    from stethoscope.records import CUDA_ALLOCATED, CUDA_PEAK, CUDA_RESERVED, GRAD_NORM, LOSS, LOSS_SCALE, StepRecord
    from stethoscope.store.query import open_run
    from stethoscope.testing import count_host_reads

    torch.manual_seed(0)
    dev = torch.device("cuda")
    cfg = GPTConfig(n_layer=4, n_embd=256, block_size=128)
    model = TinyGPT(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scaler = torch.amp.GradScaler("cuda")
    results: list[tuple[str, bool, str]] = []

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randint(0, cfg.vocab_size, (32, cfg.block_size), device=dev)
        return x, torch.roll(x, -1, dims=1)

    def step(mon: object | None, s: int) -> torch.Tensor:
        x, y = batch()
        with torch.autocast("cuda", dtype=torch.float16):
            _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if mon is not None:
            mon.step(s, loss=loss.detach())  # type: ignore[attr-defined]
        return loss

    with tempfile.TemporaryDirectory() as d:
        run = Path(d) / "gpu-run"
        mon = stethoscope.Monitor(run, model=model, optimizer=opt, scaler=scaler, tokens_per_step=32 * cfg.block_size,
                                  config={"model": "tiny-gpt-gpu"}, strict=True)
        for s in range(20):  # warm-up: allocator, cuBLAS handles, first flush
            step(mon, s)
        mon.flush()
        with count_host_reads() as base_reads:
            for s in range(20, 70):
                step(None, s)
        with count_host_reads() as mon_reads:
            for s in range(70, 120):
                step(mon, s)
        added = (mon_reads.count - base_reads.count) / 50
        results.append(("no per-step host sync (added reads/step, flushes included)", added <= 0.5,
                        f"{added:.2f} (loop alone {base_reads.count / 50:.2f}/step)"))
        # the fused device-side norm against torch's own, on the same (unscaled) gradients
        x, y = batch()
        with torch.autocast("cuda", dtype=torch.float16):
            _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        ref = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None]).item()
        opt.step()
        mon.step(120, loss=loss.detach())
        for s in range(121, args.steps):
            step(mon, s)
        mon.close()
        reader = open_run(run)
        series = {name: reader.series(name) for name in (LOSS, GRAD_NORM, CUDA_ALLOCATED, CUDA_RESERVED, CUDA_PEAK,
                                                         LOSS_SCALE)}
        gn = dict(zip(*series[GRAD_NORM]))
        got = gn.get(120)
        results.append(("grad norm = torch.nn.utils.get_total_norm", got is not None and math.isclose(got, ref, rel_tol=1e-3),
                        f"{got} vs {ref:.6g}"))
        for name in (CUDA_ALLOCATED, CUDA_RESERVED, CUDA_PEAK):
            steps, vals = series[name]
            ok = len(vals) > 0 and all(v > 0 for v in vals)
            results.append((f"{name} recorded", ok, f"{len(vals)} points, last {vals[-1] if len(vals) else None}"))
        steps, scales = series[LOSS_SCALE]
        results.append(("amp/loss_scale recorded", len(scales) > 0, f"{len(scales)} points, last {scales[-1] if len(scales) else None}"))
        steps, losses = series[LOSS]
        monitored = args.steps - 50  # steps 20-69 ran without the Monitor (the host-read baseline)
        results.append(("every monitored step's loss stored", len(losses) == monitored, f"{len(losses)} of {monitored}"))
        records = [StepRecord(int(s), {LOSS: float(v)}) for s, v in zip(steps, losses)]
        found = diagnose_records(records)
        loud = [f"{f.type}@{f.step}" for f in found if f.severity in ("error", "critical")]
        results.append(("no error on a clean GPU run", not loud, ", ".join(loud) or "none"))
    return report(results, torch)


def report(results: list[tuple[str, bool, str]], torch: object) -> int:
    """PASS/FAIL a line, the device and a count; the exit status (1 if any failed). bench/gpu_health_real.py too."""
    failed = 0
    for name, ok, detail in results:
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
