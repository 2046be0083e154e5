"""OpenAI baselines' HER prints a box of `| name | value |` rows an epoch, its step the epoch (`| epoch | 5 |`),
after its settings one a line (`_Q_lr: 0.001`): read as records at their epochs (wild-logs-5's R1: refused,
"metrics without a step counter .. '_Q_lr: 0.001'", and a run that never learnt lost). Synthetic excerpt."""

from __future__ import annotations

from stethoscope.importers import read_any
from tests.importers.series import series

_SETTINGS = "_Q_lr: 0.001\n_action_l2: 1.0\n_batch_size: 256\n_buffer_size: 1000000\n_clip_obs: 200.0\n" \
            "_network_class: baselines.her.actor_critic:ActorCritic\n_polyak: 0.95\nn_cycles: 10\nT: 50\n"


def _boxes(epochs: int) -> str:
    out = [_SETTINGS, "Training...\n"]
    for e in range(epochs):
        out.append("------------------------------------\n")
        out.append(f"| epoch              | {e:<11} |\n| stats_g/mean       | 0.8444305   |\n")
        out.append(f"| test/episode       | {20.0 * (e + 1):<11} |\n| test/mean_Q        | {-3.0 - e:<11} |\n")
        out.append(f"| test/success_rate  | {0.05 * (e % 3):<11.2f} |\n| train/episode      | {100.0 * (e + 1):<11} |\n")
        out.append("------------------------------------\n")
        if e % 5 == 0:
            out.append(f"Saving periodic policy to /tmp/openai-2018-03-28/policy_{e}.pkl ...\n")
    return "".join(out)


def test_a_box_an_epoch_is_read_at_its_epoch(write) -> None:
    (run,) = read_any(write("log.txt", _boxes(12)))
    success = series(run, "test/success_rate")
    assert sorted(success) == list(range(12))
    assert success[2] == 0.1 and success[3] == 0.0
    assert series(run, "test/mean_Q")[11] == -14.0
