"""`cpmobius.toy.cache`: two runs of one seed started at once on a fresh cache (two ablations launched side by
side) pretrain its toy models once: the later one waits for the folders' locks, then finds them cached."""

import json
import threading
import time

from filelock import FileLock

from cpmobius.toy.cache import _toy_record, materialize_toy_models
from cpmobius.toy.world import PretrainSpec


def test_a_run_waits_for_the_run_writing_its_models_and_then_loads_them(tmp_path, capsys):
    coach, player = tmp_path / "seed3" / "tiny-coach", tmp_path / "seed3" / "tiny-player"
    spec = PretrainSpec(player_steps=4, coach_steps=4, batch_size=8)
    record = _toy_record("Write a problem.", None, spec)
    done = []
    coach.parent.mkdir(parents=True)
    locks = [FileLock(str(f.with_name(f".{f.name}.lock"))) for f in (coach, player)]  # beside each folder
    with locks[0], locks[1]:  # the first run, pretraining
        second = threading.Thread(
            target=lambda: done.append(materialize_toy_models(coach, player, "Write a problem.", None, spec)),
            daemon=True,
        )
        second.start()
        deadline = time.monotonic() + 60
        while "waiting for another run" not in capsys.readouterr().out:
            assert second.is_alive() and time.monotonic() < deadline, "the second run did not wait for the first"
            time.sleep(0.05)
        for folder in (coach, player):  # the first run's models land
            folder.mkdir()
            (folder / "cpmobius_toy.json").write_text(json.dumps(record))
        inodes = [folder.stat().st_ino for folder in (coach, player)]
        assert not done
    second.join(timeout=60)
    assert done == [(coach, player)]
    assert [folder.stat().st_ino for folder in (coach, player)] == inodes  # loaded, not pretrained again
    assert not (player / "model.safetensors").exists()


def test_a_cached_model_cut_short_or_with_an_unreadable_marker_is_pretrained_again(tmp_path):
    from cpmobius.toy.cache import toy_models_cached

    coach, player = tmp_path / "tiny-coach", tmp_path / "tiny-player"
    spec = PretrainSpec(player_steps=2, coach_steps=2, batch_size=4)
    materialize_toy_models(coach, player, "Write a problem.", None, spec)
    assert toy_models_cached(coach, player, "Write a problem.", None, spec)
    weights = player / "model.safetensors"
    whole = weights.read_bytes()
    weights.write_bytes(whole[: len(whole) // 2])  # a disk that filled, a copy cut short
    assert not toy_models_cached(coach, player, "Write a problem.", None, spec)
    materialize_toy_models(coach, player, "Write a problem.", None, spec)
    assert weights.stat().st_size == len(whole)
    (coach / "cpmobius_toy.json").write_text('{"tiny_spec": ')  # a marker cut short: no traceback, pretrained again
    assert not toy_models_cached(coach, player, "Write a problem.", None, spec)
    materialize_toy_models(coach, player, "Write a problem.", None, spec)
    assert toy_models_cached(coach, player, "Write a problem.", None, spec)
