"""The Coach warm-up's cache (`warmup.cache_dir`): what a stored warm-up is keyed by, and how it is stored.

The warm-up itself through verl's SFT trainer, stored and reused across runs, is in tests/warmup/test_warmup.py.
"""

from __future__ import annotations

import json

import pytest
from omegaconf import open_dict

from cpmobius.config import compose_config
from cpmobius.warmup.sft import record_key, store_warmup, stored_warmup_matches, warmup_record


def _config(tmp_path, *overrides):
    coach = tmp_path / "coach"
    coach.mkdir(exist_ok=True)
    for name, text in (("config.json", "{}"), ("model.safetensors", "weights")):
        if not (coach / name).exists():
            (coach / name).write_text(text)
    data = tmp_path / "warmup.parquet"
    if not data.exists():
        data.write_bytes(b"rows")
    cfg = compose_config([f"model.coach_path={coach}", f"warmup.data={data}", "warmup.enabled=true", *overrides])
    return cfg, data


def test_the_key_follows_what_the_weights_depend_on_and_not_where_things_are(tmp_path):
    cfg, data = _config(tmp_path)
    key = record_key(warmup_record(cfg, data))
    with open_dict(cfg):
        cfg.trainer.default_local_dir = str(tmp_path / "elsewhere")
    assert record_key(warmup_record(cfg, data)) == key  # another run folder: the same warm-up

    assert record_key(warmup_record(_config(tmp_path, "warmup.lr=3e-5")[0], data)) != key
    assert record_key(warmup_record(_config(tmp_path, "seed=3")[0], data)) != key
    data.write_bytes(b"other rows")
    assert record_key(warmup_record(cfg, data)) != key
    data.write_bytes(b"rows")
    (tmp_path / "coach" / "model.safetensors").write_text("other weights")
    assert record_key(warmup_record(cfg, data)) != key


def test_a_finished_warmup_is_stored_whole_and_a_stored_copy_is_kept(tmp_path):
    run = tmp_path / "run" / "coach_warmup"
    hf_dir = run / "global_step_3" / "huggingface"
    hf_dir.mkdir(parents=True)
    (hf_dir / "model.safetensors").write_text("trained")
    (run / "sft.log").write_text("train/loss: 0.5")
    record = {"sft": ["optim.lr=0.001"], "coach": {}, "data": "x", "versions": {}}
    folder = tmp_path / "warmups" / record_key(record)
    assert not stored_warmup_matches(folder, record)
    store_warmup(hf_dir, folder, record)
    assert stored_warmup_matches(folder, record)
    assert (folder / "global_step_3" / "huggingface" / "model.safetensors").read_text() == "trained"
    assert (folder / "sft.log").read_text() == "train/loss: 0.5"
    assert json.loads((folder / "cpmobius_warmup.json").read_text()) == record
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temporary folder left behind

    (hf_dir / "model.safetensors").write_text("a second run of the same inputs")
    store_warmup(hf_dir, folder, record)  # the first stored copy stays
    assert (folder / "global_step_3" / "huggingface" / "model.safetensors").read_text() == "trained"
    assert not stored_warmup_matches(folder, {**record, "data": "y"})  # a record that does not match is no hit


def test_a_half_written_store_is_no_hit(tmp_path):
    record = {"sft": [], "coach": {}, "data": "x", "versions": {}}
    folder = tmp_path / record_key(record)
    folder.mkdir()
    (folder / "cpmobius_warmup.json").write_text(json.dumps(record))
    (folder / "latest_checkpointed_iteration.txt").write_text("3")
    assert not stored_warmup_matches(folder, record)  # the HF folder is missing


@pytest.mark.parametrize(
    ("tracker", "marker"),
    [("", None), ("03", None), ("3", '{"sft": ['), ("3", "\udcff")],
    ids=["empty tracker", "not a step", "cut marker", "marker not UTF-8"],
)
def test_a_store_with_an_empty_tracker_or_a_cut_marker_is_no_hit_and_no_error(tmp_path, tracker, marker):
    record = {"sft": [], "coach": {}, "data": "x", "versions": {}}
    folder = tmp_path / record_key(record)
    for step in ("", "03", "3"):  # the folders an empty or zero-padded tracker would have named
        (folder / f"global_step_{step}" / "huggingface").mkdir(parents=True)
    text = json.dumps(record) if marker is None else marker
    (folder / "cpmobius_warmup.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    (folder / "latest_checkpointed_iteration.txt").write_text(tracker)
    assert not stored_warmup_matches(folder, record)
