"""`stethoscope check-data`: each defect planted at known rows of a small file and reported at those rows,
in every format we read (JSONL, JSON, CSV, Parquet, a datasets save_to_disk folder)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from stethoscope.cli.main import cli
from tests.conftest import REPO

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()


def _text(i: int, n: int = 8) -> str:
    """A distinct sentence per i (words picked by the digits of i in base 16)."""
    return " ".join(WORDS[(i * 7 + k * (i + 3)) % 16] for k in range(n)) + f" number{i}"


def _chatml(text: str) -> str:
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\nok<|im_end|>"


def _run(*args: str) -> tuple[int, dict | str, str]:
    res = CliRunner().invoke(cli, ["check-data", *args])
    out = res.stdout
    if "--json" in args and res.exit_code in (0, 1):
        out = json.loads(out)
    return res.exit_code, out, res.stderr


def _by(result: dict, check: str, file: str = "train") -> dict:
    return next(c for c in result["checks"] if c["check"] == check and c["file"] == file)


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # Python's json: NaN/Infinity written bare
    return path


def _train_rows() -> list[dict]:
    rows = [{"text": _chatml(_text(i))} for i in range(30)]
    rows[3] = {"text": "   "}                                               # empty
    rows[7] = dict(rows[2])                                                 # exact duplicate of 2
    rows[11] = {"text": rows[5]["text"].upper().replace(" ", "  ") + "!!"}  # near duplicate of 5
    rows[13] = {"input_ids": [5, 6, 7, 8], "labels": [-100, -100, -100, -100]}  # every label masked
    rows[14] = {"input_ids": [5, 6, 7, 9], "labels": [-100, -100, 7, 9]}   # some labels: fine
    rows[17] = {"text": _chatml(_text(17)), "weight": float("nan")}
    rows[19] = {"text": _chatml(_text(19)), "reward": [0.5, float("inf")]}
    rows[21] = {"text": _chatml(_text(21, n=60))}                           # 60 words: long in tokens and characters
    rows[23] = {"text": f"[INST] {_text(23)} [/INST] ok"}                   # another template family
    rows[25] = {"prompt": _chatml(_text(25, n=55)), "completion": "short answer"}  # prompt alone over the limit
    rows[27] = {"prompt": _chatml(_text(27)), "completion": " "}            # empty response
    return rows


@pytest.fixture
def train(tmp_path: Path) -> Path:
    return _write_jsonl(tmp_path / "train.jsonl", _train_rows())


@pytest.fixture
def tokenizer(tmp_path: Path) -> Path:
    """A real WordLevel tokenizer.json trained here on the words the rows use (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.train_from_iterator([_text(i, 60) for i in range(40)] + WORDS,
                            trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    path = tmp_path / "tok" / "tokenizer.json"
    path.parent.mkdir()
    tok.save(str(path))
    return path


def test_every_defect_at_its_rows(train):
    code, res, _ = _run(str(train), "--json", "--max-len", "200")
    assert code == 0 and res["files"][0]["rows"] == 30
    assert _by(res, "empty")["rows"] == [3] and _by(res, "empty")["lines"] == [4]
    dup = _by(res, "duplicate")
    assert dup["rows"] == [7] and dup["of_rows"] == [2] and dup["count"] == 1
    near = _by(res, "near_duplicate")
    assert near["rows"] == [11] and near["of_rows"] == [5]
    masked = _by(res, "labels_all_masked")
    assert masked["rows"] == [13] and masked["percent"] == pytest.approx(100 / 30, abs=1e-3)
    nonfinite = _by(res, "nonfinite")
    assert nonfinite["rows"] == [17, 19] and nonfinite["fields"] == {"17": "weight", "19": "reward"}
    assert _by(res, "empty_response")["rows"] == [27]
    assert _by(res, "response_truncated")["rows"] == [25]
    long = _by(res, "too_long")
    assert long["rows"] == [21, 25] and long["unit"].startswith("characters")
    mixed = _by(res, "template_mixed")
    assert mixed["templates"]["chatml"] == 25 and mixed["templates"]["llama-2/mistral"] == 1
    assert 23 in mixed["rows"] and 3 in mixed["rows"]  # the [INST] row and the empty row ("none")
    assert res["checks"][0]["severity"] == "error" and res["checks"][0]["count"] > 0  # problems first, errors first


def test_tokens_with_a_local_tokenizer(train, tokenizer, tmp_path):
    # 60 words is 61 tokens (WordLevel over whitespace) plus the markers; a 9-word row is ~20.
    code, res, _ = _run(str(train), "--json", "--tokenizer", str(tokenizer), "--max-len", "50")
    assert code == 0
    long = _by(res, "too_long")
    assert long["unit"] == "tokens" and long["rows"] == [21, 25] and long["max_len"] == 50
    assert _by(res, "response_truncated")["rows"] == [25]
    # The same limit in characters flags every row: the unit really changed.
    _, chars, _ = _run(str(train), "--json", "--max-len", "50")
    assert _by(chars, "too_long")["count"] > 20
    # model_max_length from tokenizer_config.json beside the tokenizer is the default limit.
    (tokenizer.parent / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 50}))
    _, res, _ = _run(str(train), "--json", "--tokenizer", str(tokenizer.parent))
    assert _by(res, "too_long")["rows"] == [21, 25]


def test_eval_overlap_and_template_mismatch(train, tmp_path):
    rows = [{"text": f"<|start_header_id|>user<|end_header_id|>\n{_text(100 + i)}<|eot_id|>"} for i in range(10)]
    rows[1] = {"text": _chatml(_text(4))}                          # the same as train row 4
    rows[6] = {"text": _chatml(_text(6)).lower() + "  ."}          # train row 6 up to case and punctuation
    ev = _write_jsonl(tmp_path / "eval.jsonl", rows)
    code, res, _ = _run(str(train), "--eval", str(ev), "--json", "--fail-on", "error")
    assert code == 1
    overlap = _by(res, "eval_overlap", "eval")
    assert overlap["rows"] == [1] and overlap["train_rows"] == [4] and overlap["percent"] == 10.0
    near = _by(res, "eval_near_overlap", "eval")
    assert near["rows"] == [6] and near["train_rows"] == [6]
    mismatch = _by(res, "template_mismatch", "eval")
    assert mismatch["train_template"] == "chatml" and mismatch["eval_template"] == "llama-3"
    assert mismatch["count"] == 8 and mismatch["rows"][:3] == [0, 2, 3]


def test_clean_file_passes(tmp_path):
    clean = _write_jsonl(tmp_path / "clean.jsonl", [{"text": _text(i)} for i in range(20)])
    code, res, _ = _run(str(clean), "--json", "--fail-on", "warning")
    assert code == 0 and res["problems"] == 0
    code, out, _ = _run(str(clean))
    assert code == 0 and "no problems found" in out


def test_human_output_names_rows_and_lines(train):
    code, out, _ = _run(str(train), "--max-len", "200")
    assert code == 0
    assert "7 (line 8) = 2" in out and "17 (line 18) [weight]" in out and "every label masked" in out


def test_json_array_and_csv(tmp_path):
    rows = [{"instruction": _text(i), "output": f"answer {i}", "score": 0.5} for i in range(12)]
    rows[4]["score"] = float("-inf")
    rows[9]["output"] = ""
    arr = tmp_path / "data.json"
    arr.write_text(json.dumps({"data": rows}))
    _, res, _ = _run(str(arr), "--json")
    assert _by(res, "nonfinite")["rows"] == [4] and _by(res, "empty_response")["rows"] == [9]
    assert "lines" not in _by(res, "nonfinite")
    csv_path = tmp_path / "data.csv"
    lines = ["prompt,response,score"] + [f'"{_text(i)}",answer {i},{0.1 * i:.1f}' for i in range(12)]
    lines[6] = f'"{_text(5)}",answer 5,nan'      # row 5 (line 7): NaN and a duplicate of row 4's prompt? no: of itself
    lines[10] = lines[3]                          # row 9 duplicates row 2
    csv_path.write_text("\n".join(lines) + "\n")
    _, res, _ = _run(str(csv_path), "--json")
    assert _by(res, "nonfinite")["rows"] == [5] and _by(res, "nonfinite")["lines"] == [7]
    assert _by(res, "duplicate")["rows"] == [9] and _by(res, "duplicate")["of_rows"] == [2]


def test_parquet(tmp_path):
    texts = [_text(i) for i in range(50)]
    texts[40] = texts[10]
    labels = [[1, 2, 3]] * 50
    labels[33] = [-100, -100, -100]
    scores = [1.0] * 50
    scores[12] = math.nan
    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"text": texts, "labels": labels, "score": scores}), path, row_group_size=16)
    _, res, _ = _run(str(path), "--json")
    assert res["files"][0]["format"] == "parquet" and res["files"][0]["rows"] == 50
    assert _by(res, "duplicate")["rows"] == [40] and _by(res, "labels_all_masked")["rows"] == [33]
    assert _by(res, "nonfinite")["rows"] == [12]


def _save_to_disk(folder: Path, table: pa.Table) -> None:
    """A folder as datasets' save_to_disk writes it: Arrow IPC stream shards + dataset_info.json + state.json."""
    folder.mkdir(parents=True)
    half = table.num_rows // 2
    shards = []
    for k, part in enumerate((table.slice(0, half), table.slice(half))):
        name = f"data-{k:05d}-of-00002.arrow"
        with pa.ipc.new_stream(str(folder / name), part.schema) as w:
            w.write_table(part, max_chunksize=7)
        shards.append({"filename": name})
    (folder / "dataset_info.json").write_text(json.dumps({"features": {}}))
    (folder / "state.json").write_text(json.dumps({"_data_files": shards, "_split": None}))


def test_datasets_save_to_disk_folder(tmp_path):
    n = 30
    ids = [[i, i + 1, i + 2] for i in range(n)]
    masked = [[-100, -100, -100] if i in (4, 22) else [i, i + 1, i + 2] for i in range(n)]
    msgs = [[{"role": "user", "content": _text(i)}, {"role": "assistant", "content": "ok"}] for i in range(n)]
    root = tmp_path / "ds"
    _save_to_disk(root / "train", pa.table({"messages": msgs, "input_ids": ids, "labels": masked}))
    ev = [[{"role": "user", "content": _text(i)}, {"role": "assistant", "content": "ok"}] for i in (3, 50, 51)]
    _save_to_disk(root / "validation", pa.table({"messages": ev}))
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "validation"]}))
    _, res, _ = _run(str(root), "--json")
    train, ev_file = res["files"]
    assert train["format"] == "arrow" and train["rows"] == n and train["path"].endswith("[train]")
    assert ev_file["path"].endswith("[validation]") and ev_file["rows"] == 3
    assert train["length"]["unit"] == "tokens" and train["length"]["max"] == 3
    assert _by(res, "labels_all_masked")["rows"] == [4, 22]
    assert _by(res, "eval_overlap", "eval")["rows"] == [0] and _by(res, "eval_overlap", "eval")["train_rows"] == [3]
    code, res, _ = _run(str(root / "train"), "--json")  # one split's folder alone
    assert code == 0 and res["files"][0]["rows"] == n and len(res["files"]) == 1


@pytest.mark.parametrize("content, name, expect", [
    ('{"text": "a"}\n{"text": \n', "bad.jsonl", "bad.jsonl:2: not valid JSON"),
    ('{"text": "a"}\n[1, 2]\n', "list.jsonl", "list.jsonl:2: expected a JSON object per line, got list"),
    ("hello", "notes.txt", "notes.txt: unknown dataset format '.txt'"),
    ("a,b\n1,2,3\n", "wide.csv", "wide.csv:2: 3 cells, the header names 2"),
    ("not parquet", "x.parquet", "x.parquet: not a readable Parquet file"),
    (None, "missing.jsonl", "missing.jsonl: no such file or folder"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, content, name, expect):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    code, _, err = _run(str(path))
    assert code == 2 and expect in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_bad_options(tmp_path, train):
    code, _, err = _run(str(train), "--max-len", "0")
    assert code == 2 and "--max-len must be a positive" in err
    code, _, err = _run(str(train), "--tokenizer", str(tmp_path / "nope.json"))
    assert code == 2 and "no such tokenizer file" in err
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    code, _, err = _run(str(train), "--tokenizer", str(bad))
    assert code == 2 and "not a tokenizers tokenizer.json" in err


def test_subprocess_no_progress_bar_when_piped(train, cli_env):
    res = subprocess.run([sys.executable, "-m", "stethoscope.cli.main", "check-data", str(train), "--json"],
                         capture_output=True, text=True, env=cli_env, cwd=REPO)
    assert res.returncode == 0 and res.stderr == "" and json.loads(res.stdout)["files"][0]["rows"] == 30


def test_core_reads_jsonl_without_pyarrow_or_tokenizers(train):
    code = ("import sys; sys.modules['pyarrow'] = None; sys.modules['tokenizers'] = None\n"
            "from stethoscope.cli.main import main\n"
            f"main(['check-data', {str(train)!r}, '--json'])")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert res.returncode == 0 and json.loads(res.stdout)["files"][0]["rows"] == 30, res.stderr


def test_minhash_finds_edited_copies_that_normalized_hashing_misses(tmp_path):
    import random

    rng = random.Random(0)
    words = [f"{w}{k}" for w in WORDS for k in range(20)]
    rows = [" ".join(rng.choice(words) for _ in range(100)) for _ in range(300)]
    edited = rows[10].split()
    edited[80] = "CHANGED"
    rows.append(" ".join(edited))              # row 300: row 10 with a word changed (Jaccard 95/101 = 0.94)
    rows.append(rows[20].upper() + " !!")      # row 301: row 20 up to case and punctuation
    ev_text = rows[50].split()
    ev_text[7] = "zzz"
    train = _write_jsonl(tmp_path / "train.jsonl", [{"text": r} for r in rows])
    ev = _write_jsonl(tmp_path / "eval.jsonl", [{"text": " ".join(ev_text)},
                                                {"text": "a new question nobody trained on at all"}])
    _, res, _ = _run(str(train), "--eval", str(ev), "--json")
    assert _by(res, "near_duplicate")["rows"] == [301] and _by(res, "eval_near_overlap", "eval")["count"] == 0
    _, res, _ = _run(str(train), "--eval", str(ev), "--json", "--near", "minhash")
    near = _by(res, "near_duplicate")
    assert near["rows"] == [300, 301] and near["of_rows"] == [10, 20]  # and none of the 300 unrelated rows
    overlap = _by(res, "eval_near_overlap", "eval")
    assert overlap["rows"] == [0] and overlap["train_rows"] == [50]
    assert res["near_duplicates"].startswith("MinHash")


def test_minhash_gives_the_same_answer_in_every_process(tmp_path):
    """Words are hashed with CRC-32s, not Python's per-process salted str hash: two processes with
    different hash seeds report the same near duplicates, signature for signature."""
    from stethoscope.debug.datacheck.minhash import signatures

    text = "the quick brown fox jumps over the lazy dog again and again"
    code = ("import sys; from stethoscope.debug.datacheck.minhash import signatures\n"
            f"print(signatures([(0, {text!r})])[1].tolist())")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONPATH": str(REPO / "src"), "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2", "3")}
    assert len(outs) == 1 and json.loads(outs.pop()) == signatures([(0, text)])[1].tolist()
