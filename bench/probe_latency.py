"""How fast the live probe answers, and what it costs the training step.

1. A live demo run (the bench model, a tiny GPT, training in a child process with the Monitor's probe on):
   `status` and `backtrace` answer times — over HTTP from a client (server side + loopback) and from the
   CLI (`stethoscope probe RUN status`: includes starting Python) — medians.
2. `query` over a store of 1M points (10 series x 100k steps): an aggregate by step window of one series
   and of all ten, through the probe server — medians, the default engine (DuckDB over the packed chunks)
   interleaved with SQLite, and whether both gave the same answer.
3. The server, the hang watchdog and the health gather (on a one-rank gloo group, every 50 steps) on the
   bench model's step time: Monitor(serve=True) against Monitor(serve=False), interleaved rounds (each round
   builds its Monitor, so only that variant's threads run), medians of per-round ratios; and the cost of
   `on_step` itself, timed alone.

    python bench/probe_latency.py [--rounds 7] [--steps 40] [--only latency|query|overhead]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

B, T = 16, 64


def child(run_dir: str, seconds: float) -> None:
    """The live demo run: train the bench model with the Monitor (probe on) for `seconds`."""
    import torch

    from stethoscope import Monitor
    from stethoscope.demo.data import CharData, stdlib_text
    from stethoscope.demo.gpt import GPTConfig, TinyGPT

    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = CharData(stdlib_text(), T)
    model = TinyGPT(GPTConfig(block_size=T, n_layer=2, n_embd=128))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    end = time.monotonic() + seconds
    with Monitor(run_dir, model=model, optimizer=opt, tokens_per_step=B * T) as mon:
        step = 0
        while time.monotonic() < end:
            x, y, ids = data.batch(B)
            _, loss = model(x, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            mon.step(step, loss=loss, batch_ids=ids)
            step += 1


def latency(tmp: Path, calls: int, cli_calls: int) -> None:
    from stethoscope.probe import registry
    from stethoscope.probe.client import ProbeClient

    run = tmp / "live"
    env = dict(os.environ, PYTHONPATH=str(SRC), STETHOSCOPE_LIVE_DIR=str(tmp / "registry"), OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, __file__, "--child", str(run), "--seconds", "90"], env=env)
    try:
        while not list(run.glob("probe-rank-*.json")):
            time.sleep(0.1)
        time.sleep(2.0)  # past the first steps
        e = registry.run_entries(run)[0]
        client = ProbeClient.for_entry(e)
        for verb in ("status", "backtrace"):
            times = []
            for _ in range(calls):
                t0 = time.perf_counter()
                client.call(verb)
                times.append(time.perf_counter() - t0)
            cli = []
            for _ in range(cli_calls):
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "stethoscope.cli.main", "probe", str(run), verb, "--json"],
                               env=env, capture_output=True, check=True)
                cli.append(time.perf_counter() - t0)
            print(f"{verb:10s} over HTTP: median {statistics.median(times) * 1e3:6.2f} ms, p90 "
                  f"{_p90(times) * 1e3:6.2f} ms ({calls} calls; target <= 50 ms); from the CLI (a new Python "
                  f"process each): median {statistics.median(cli) * 1e3:.0f} ms ({cli_calls} calls)")
        status = client.call("status")
        print(f"           (the live run was at step {status['step']}, {status['steps_per_s']:.1f} steps/s)")
    finally:
        proc.terminate()
        proc.wait(30)


def query_1m(tmp: Path, calls: int) -> None:
    from stethoscope.probe.client import ProbeClient
    from stethoscope.probe.live import LiveProbe
    from stethoscope.store.db import RunStore, rank_path

    run = tmp / "million"
    store = RunStore(rank_path(run, 0))
    rng = random.Random(0)
    names = ["train/loss", *(f"bench/metric_{i}" for i in range(9))]
    for start in range(0, 100_000, 10_000):
        store.write_points((n, s, rng.random(), 1e9 + s) for n in names for s in range(start, start + 10_000))
    store.close()
    probe = LiveProbe(run_dir=run)  # rank 0: its store is rank-00000.sqlite
    try:
        client = ProbeClient(probe.server.host, probe.server.port, probe.server.token)
        for label, sql in (
                ("one series (100k points), 1000-step windows",
                 "SELECT step / 1000 AS w, AVG(value), MIN(value), MAX(value) FROM metrics "
                 "WHERE name = 'train/loss' GROUP BY w"),
                ("all 10 series (1M points), 1000-step windows",
                 "SELECT name, step / 1000 AS w, AVG(value) FROM metrics GROUP BY name, w")):
            times: dict[str, list[float]] = {"auto": [], "sqlite": []}
            answers: dict[str, Any] = {}
            for i in range(calls):  # interleaved, alternating which engine goes first
                for engine in ("auto", "sqlite") if i % 2 == 0 else ("sqlite", "auto"):
                    t0 = time.perf_counter()
                    answers[engine] = client.call("query", sql, engine=engine)
                    times[engine].append(time.perf_counter() - t0)
            fast, slow = (statistics.median(times[e]) for e in ("auto", "sqlite"))
            same = _same_rows(answers["auto"]["rows"], answers["sqlite"]["rows"])
            print(f"query {label}: median {fast * 1e3:.0f} ms ({answers['auto']['engine']}; target <= 200 ms) vs "
                  f"{slow * 1e3:.0f} ms (sqlite): {slow / fast:.1f}x, {len(answers['auto']['rows'])} rows, "
                  f"{'the same answer' if same else 'ANSWERS DIFFER'} ({calls} calls each)")
    finally:
        probe.close()


def _same_rows(a: list[list[Any]], b: list[list[Any]]) -> bool:
    """Equal as sets of rows (no ORDER BY: either order), floats to 1e-9 relative (sums in another order)."""
    if len(a) != len(b):
        return False
    for x, y in zip(sorted(a, key=repr), sorted(b, key=repr)):
        if len(x) != len(y) or any(not (u == v or (isinstance(u, float) and isinstance(v, float)
                                                    and abs(u - v) <= 1e-9 * max(abs(u), abs(v))))
                                   for u, v in zip(x, y)):
            return False
    return True


def overhead(tmp: Path, rounds: int, steps: int) -> None:
    import torch
    import torch.distributed as dist

    from stethoscope import Monitor
    from stethoscope.demo.data import CharData, stdlib_text
    from stethoscope.demo.gpt import GPTConfig, TinyGPT
    from stethoscope.probe import ProbeConfig

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist.init_process_group("gloo", rank=0, world_size=1)
    data = CharData(stdlib_text(), T)
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(block_size=T, n_layer=2, n_embd=128))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    variants = {"serve=False": False, "serve=True": ProbeConfig(health_every=50)}
    medians: dict[str, list[float]] = {n: [] for n in variants}
    rng = random.Random(0)
    step_no = 0
    for r in range(rounds):
        order = list(variants)
        rng.shuffle(order)
        for name in order:
            with Monitor(tmp / f"ab-{r}-{name}", model=model, optimizer=opt, tokens_per_step=B * T,
                         serve=variants[name]) as mon:
                times = []
                for i in range(steps + 5):
                    t0 = time.perf_counter()
                    x, y, ids = data.batch(B)
                    _, loss = model(x, y)
                    loss.backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    mon.step(step_no, loss=loss, batch_ids=ids)
                    step_no += 1
                    if i >= 5:  # warm-up after the Monitor starts
                        times.append(time.perf_counter() - t0)
                medians[name].append(statistics.median(times))
    ratios = [a / b for a, b in zip(medians["serve=True"], medians["serve=False"])]
    base = statistics.median(medians["serve=False"])
    print(f"step time, bench model (tiny GPT, batch {B}x{T}, CPU): serve=False {base * 1e3:.1f} ms, serve=True "
          f"{statistics.median(medians['serve=True']) * 1e3:.1f} ms; ratio {statistics.median(ratios):.4f} "
          f"(per-round {min(ratios):.3f}–{max(ratios):.3f}, {rounds} interleaved rounds; target <= 1.01)")
    on_step_cost(base)
    dist.destroy_process_group()


def on_step_cost(step_s: float, n: int = 20_000) -> None:
    """`LiveProbe.on_step` alone (watchdog beat, health window; a gather every 50 calls), per call."""
    from stethoscope.probe import ProbeConfig
    from stethoscope.probe.live import LiveProbe

    with tempfile.TemporaryDirectory() as tmp:
        probe = LiveProbe(ProbeConfig(health_every=50), run_dir=tmp)
        probe.attach(None, run_dir=tmp, rank=0, world_size=1, recorder=None)
        t0 = time.perf_counter()
        for s in range(n):
            probe.on_step(s)
        per = (time.perf_counter() - t0) / n
        probe.close()
    print(f"on_step alone: {per * 1e6:.1f} us per step incl. one all_gather per 50 steps = "
          f"{per / step_s:.3%} of the bench model's step")


def _p90(xs: list[float]) -> float:
    return sorted(xs)[int(0.9 * (len(xs) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=60.0, help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--only", choices=("latency", "query", "overhead"), default=None, help="run one part")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    if args.child:
        child(args.child, args.seconds)
        return
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["STETHOSCOPE_LIVE_DIR"] = str(Path(tmp) / "registry")
        if args.only in (None, "latency"):
            latency(Path(tmp), args.calls, 5)
        if args.only in (None, "query"):
            query_1m(Path(tmp), 10)
        if args.only in (None, "overhead"):
            overhead(Path(tmp), args.rounds, args.steps)
    print(json.dumps({"machine_load": os.getloadavg()}))


if __name__ == "__main__":
    main()
