"""scripts/fetch_benchmarks.py writes the layout the loop's validation and the evaluation CLI read."""

from __future__ import annotations

import json

import pytest

from cpmobius.eval.data import default_data_dir


@pytest.mark.skipif(not (default_data_dir() / "amc" / "amc.jsonl").is_file(), reason="no ../shared/data")
def test_local_copy_round_trips_into_what_validation_reads(tmp_path, capsys, load_script):
    from cpmobius.settings import ValidationSettings
    from cpmobius.validation import load_validation_set

    fetch = load_script("scripts/fetch_benchmarks.py")
    out = tmp_path / "data" / "eval"
    assert (
        fetch.main(
            [
                "--out",
                str(out),
                "--source",
                "local",
                "--data-dir",
                str(default_data_dir()),
                "--benchmarks",
                "amc",
                "aime24",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in (out / "amc" / "amc.jsonl").read_text().splitlines()]
    original = [json.loads(line) for line in (default_data_dir() / "amc" / "amc.jsonl").read_text().splitlines()]
    assert [(r["id"], r["answer"]) for r in rows] == [(r["id"], r["answer"]) for r in original]
    val = load_validation_set(ValidationSettings(dataset="amc", data_dir=str(tmp_path / "data"), size=None))
    assert len(val) == 83 and val.ids[0] == original[0]["id"]
    (out / "aime24" / "aime24.jsonl").write_text("kept\n")
    assert (
        fetch.main(
            ["--out", str(out), "--source", "local", "--data-dir", str(default_data_dir()), "--benchmarks", "aime24"]
        )
        == 0
    )
    assert (out / "aime24" / "aime24.jsonl").read_text() == "kept\n"  # not rewritten without --force


def test_a_missing_source_is_one_line_and_exit_2(tmp_path, capsys, load_script):
    fetch = load_script("scripts/fetch_benchmarks.py")
    code = fetch.main(
        [
            "--out",
            str(tmp_path / "eval"),
            "--source",
            "local",
            "--data-dir",
            str(tmp_path / "none"),
            "--benchmarks",
            "amc",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fetch_benchmarks: amc: FileNotFoundError") and "\n" not in err
    assert not (tmp_path / "eval" / "amc" / "amc.jsonl").exists()
