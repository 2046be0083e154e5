"""kill -9 a training process at random moments during checkpoint saves, 50 times (issue 11).

The test suite does it 12 times (tests/checkpoint/test_kill.py); this runs the same check 50 times:
every resume must start from the newest verified checkpoint and reproduce the uninterrupted run's
losses bitwise. Usage: python bench/checkpoint_kills.py [KILLS]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.checkpoint.test_kill import kill_during_saves  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    kills = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    with tempfile.TemporaryDirectory() as tmp:
        stats = kill_during_saves(Path(tmp), kills=kills, seed=1)
    print(f"{stats['kills']} kills survived ({stats['killed_mid_save']} left a half-written save behind); "
          f"every resume from the newest verified checkpoint, {stats['records']} losses bitwise equal")


if __name__ == "__main__":
    main()
