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
