"""Step-time cost of alerts whose endpoints are dead: a webhook that hangs and two that answer 500.

Two tiny GPTs train side by side in one process, interleaved round by round (A, B, A, B, ...): A has
the Monitor with its detectors and no alerts, B the same Monitor with alerts going to the dead
endpoints (servers on 127.0.0.1 started here). Both report a NaN loss once per round (the model
itself trains on), so B's rules page, resolve and page again all the time (cooldown 0) and its
delivery lanes stay busy with timeouts and retries. Prints each arm's median step time, the median
of the per-round ratios B/A with min-max and interquartile range, what B's deliveries did, and how
long B's close() took (at most the delivery timeout, plus the writer's last flush).

    python bench/alert_overhead.py [--rounds 31] [--steps 12] [--timeout 2] [--control]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stethoscope import Monitor  # noqa: E402
from stethoscope.act import AlertsConfig, MemoryChannel, RuleConfig, Webhook  # noqa: E402
from stethoscope.demo.data import CharData, stdlib_text  # noqa: E402
from stethoscope.demo.gpt import GPTConfig, TinyGPT  # noqa: E402
from stethoscope.detect import DetectConfig  # noqa: E402
from stethoscope.store.query import open_run  # noqa: E402

B, T = 16, 64
RELEASE = threading.Event()


class DeadEndpoint(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.startswith("/hang"):
            RELEASE.wait(600)
            return
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


class Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, *args: object) -> None:
        pass


class Arm:
    """One model, optimizer and Monitor; `run(n)` trains n steps and returns their step times."""

    def __init__(self, run_dir: Path, data: CharData, alerts: AlertsConfig | bool) -> None:
        torch.manual_seed(0)
        self.data = data
        self.model = TinyGPT(GPTConfig(block_size=T, n_layer=2, n_embd=128))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.mon = Monitor(run_dir, model=self.model, optimizer=self.opt, tokens_per_step=B * T, alerts=alerts,
                           detect=DetectConfig(nan_quiet_steps=10))
        self.step_no = 0

    def run(self, steps: int) -> tuple[list[float], list[float]]:
        """Wall time and this (training) thread's CPU time of each step."""
        times, cpu = [], []
        for i in range(steps):
            t0, c0 = time.perf_counter(), time.thread_time()
            x, y, _ = self.data.batch(B)
            _, loss = self.model(x, y)
            loss.backward()
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
            reported = loss if i != steps // 2 else torch.tensor(float("nan"))  # one NaN a round: pages
            self.mon.step(self.step_no, loss=reported)
            self.step_no += 1
            times.append(time.perf_counter() - t0)
            cpu.append(time.thread_time() - c0)
        return times, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--timeout", type=float, default=2.0, help="delivery timeout (s) of the dead channels")
    ap.add_argument("--control", action="store_true", help="B without alerts too (A/A): the machine's noise floor")
    ap.add_argument("--memory", action="store_true", help="B's alerts go to in-memory channels (no network)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    server = Quiet(("127.0.0.1", 0), DeadEndpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    channels = [Webhook(f"{base}/hang"), Webhook(f"{base}/fail-a"), Webhook(f"{base}/fail-b")]
    if args.memory:
        channels = [MemoryChannel() for _ in channels]
    alerts = AlertsConfig(channels, RuleConfig(cooldown_s=0), timeout_s=args.timeout, retries=2)
    data = CharData(stdlib_text(), T)
    with tempfile.TemporaryDirectory() as tmp:
        arms = {"A": Arm(Path(tmp) / "a", data, False), "B": Arm(Path(tmp) / "b", data, False if args.control else alerts)}
        for arm in arms.values():
            arm.run(10)  # warm-up
        medians: dict[str, list[float]] = {"A": [], "B": []}
        cpu: dict[str, list[float]] = {"A": [], "B": []}
        for r in range(args.rounds):
            for name in ("A", "B") if r % 2 == 0 else ("B", "A"):
                wall, own = arms[name].run(args.steps)
                medians[name].append(statistics.median(wall))
                cpu[name].append(statistics.median(own))
        arms["A"].mon.close()
        t0 = time.monotonic()
        arms["B"].mon.close()
        closing = time.monotonic() - t0
        with open_run(Path(tmp) / "b") as reader:
            _, rows = reader.query("SELECT json_extract(data, '$.status'), COUNT(*) FROM alerts GROUP BY 1")
    RELEASE.set()
    server.shutdown()
    ratios = sorted(b / a for a, b in zip(medians["A"], medians["B"]))
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
    print(f"rounds: {args.rounds} x {args.steps} steps per arm, interleaved; torch threads: 1")
    print(f"A (Monitor, no alerts):              median step {statistics.median(medians['A']) * 1e3:.2f} ms")
    print(f"B (alerts to {'memory' if args.memory else '1 hanging + 2 x 500'}):   median step {statistics.median(medians['B']) * 1e3:.2f} ms")
    cpu_ratio = statistics.median(b / a for a, b in zip(cpu["A"], cpu["B"]))
    print(f"training thread's CPU time per step, ratio B/A: median {cpu_ratio:.4f} (other processes on the "
          "machine do not move it; a wall-time ratio far from it is the machine's noise)")
    print(f"ratio B/A: median {statistics.median(ratios):.4f}  (min {ratios[0]:.4f}, max {ratios[-1]:.4f}, "
          f"IQR {q[0]:.4f}-{q[2]:.4f})  overhead {100 * (statistics.median(ratios) - 1):+.2f}%")
    print("B's deliveries: " + ", ".join(f"{n} {status}" for status, n in rows) +
          f"; B close(): {closing:.2f} s (delivery timeout {args.timeout:g} s)")


if __name__ == "__main__":
    main()
