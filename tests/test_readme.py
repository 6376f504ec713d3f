"""The README's and the docs' commands run as written, as a new user runs them: every ```bash block of
``README.md`` and of every ``docs/*.md`` page meant for a CPU machine, in a fresh copy of the repository
(the tracked files, as a clone has them) with no ``../shared`` beside it, no ``$CPMOBIUS_SHARED_DATA``, a
model cache of its own (``$CPMOBIUS_CACHE``, which ``configs/model/tiny.yaml`` reads) that holds at most the
toy models the suite's other default runs pretrained (the same weights a first run makes; the first-run path
itself runs in tests/test_method_runs.py) and the Hugging Face hub switched off (``HF_HUB_OFFLINE``: the pages
say these commands download nothing).

Blocks are marked in the page itself (the README or a docs page, the same rules), by an HTML comment on the
line before the block:

* ``<!-- readme-test: skip — REASON -->``: not run (needs GPUs, the hub, a GPU run's outputs; the
  install and the test command, which CI runs itself);
* ``<!-- readme-test: skip "PREFIX" — REASON -->``: run, without the lines starting with PREFIX;
* ``<!-- readme-test: check-output -->``: each command's stdout must equal the ``# `` lines after it.

Every other ```bash block runs, each with ``bash -e`` in the copy's root, with the current
interpreter's ``python`` first on PATH (no reinstall; ``PYTHONPATH`` is the copy, so the copy's code
is what runs, Ray workers and torchrun included). Output blocks are fenced as ```text. The default
run (``python -m cpmobius.main``, in the README) is one of the blocks: about 6 to 7 minutes on 2 cores, most
of this file's time; it stays the only long one (a block that takes tens of seconds or more is marked skip,
with the reason, unless it ran before this rule). Test ids name the page and the block's line, e.g.
``docs/evaluation.md:L140``. The README is the front door: at most ``README_MAX_LINES`` lines, its details
in ``docs/``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cpmobius.cpu_kernels import cpu_vendor

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 250
BLOCK_TIMEOUT_S = 45 * 60  # the default run takes ~6 min on 2 idle cores; a loaded CI machine is slower
MARKER = re.compile(r"^<!--\s*readme-test:\s*(?P<body>.*?)\s*-->$")
SKIP = re.compile(r'^skip(?:\s+"(?P<prefix>[^"]+)")?\s*[—-]\s*(?P<reason>\S.*)$')


@dataclass
class Block:
    """One fenced block of a page: which page, where it starts, its info string, its lines and its marker."""

    line: int
    info: str
    lines: list[str]
    marker: str = ""
    skip_reason: str = ""
    skip_prefix: str = ""
    check_output: bool = False
    commands: list[str] = field(default_factory=list)
    page: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.page} line {self.line}"


def parse_readme(text: str, page: str = "README.md") -> list[Block]:
    """Every fenced block with its marker (the nearest non-blank line above it, when it is one).

    Raises:
        ValueError: an unclosed block, or a marker that is neither skip (with a reason) nor check-output.
    """
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        start, info = i, lines[i][3:].strip()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise ValueError(f"{page} line {start + 1}: unclosed code block")
        block = Block(line=start + 1, info=info, lines=lines[start + 1 : end], page=page)
        above = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        match = MARKER.match(above)
        if match:
            block.marker = match["body"]
            skip = SKIP.match(block.marker)
            if skip:
                block.skip_prefix, block.skip_reason = skip["prefix"] or "", skip["reason"]
            elif block.marker == "check-output":
                block.check_output = True
            else:
                raise ValueError(
                    f"{page} line {start + 1}: marker {above!r} is neither "
                    "'skip — REASON', 'skip \"PREFIX\" — REASON' nor 'check-output'"
                )
        blocks.append(block)
        i = end + 1
    return blocks


def runnable(block: Block) -> bool:
    return block.info == "bash" and not (block.skip_reason and not block.skip_prefix)


def script_of(block: Block) -> str:
    """The block's shell text without the lines its marker skips."""
    kept = [ln for ln in block.lines if not (block.skip_prefix and ln.lstrip().startswith(block.skip_prefix))]
    return "\n".join(kept) + "\n"


def commands_with_output(block: Block) -> list[tuple[str, str]]:
    """(command, expected stdout) pairs of a check-output block: each command line, then its `# ` lines."""
    pairs: list[tuple[str, list[str]]] = []
    for ln in block.lines:
        if ln.startswith("# ") and pairs:
            pairs[-1][1].append(ln[2:])
        elif ln.strip():
            pairs.append((ln, []))
    return [(command, "\n".join(out)) for command, out in pairs]


def _page_name(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


BLOCKS = [b for path in PAGES for b in parse_readme(path.read_text(encoding="utf-8"), _page_name(path))]
README_BLOCKS = [b for b in BLOCKS if b.page == "README.md"]
RUNNABLE = [b for b in BLOCKS if runnable(b)]


def _label(block: Block) -> str:
    return f"{block.page}:L{block.line}"


# --------------------------------------------------------------------------- the markers themselves (fast)


def test_every_block_is_fenced_as_bash_or_text_and_every_skip_says_why():
    """Nothing is left out of the run silently: a block is bash (run unless marked) or text (output)."""
    assert README_BLOCKS, "no code blocks found in the README"
    for block in BLOCKS:
        assert block.info in ("bash", "text"), f"{block.where}: fence it as ```bash or ```text"
        if block.marker:
            assert block.info == "bash", f"{block.where}: a readme-test marker on a text block"
        if block.skip_reason:
            assert len(block.skip_reason) > 10, f"{block.where}: say why the block is skipped"
        if block.skip_prefix:
            assert any(ln.lstrip().startswith(block.skip_prefix) for ln in block.lines), (
                f"{block.where}: no line starts with {block.skip_prefix!r}"
            )
    # The install and the test command are CI's own steps: they stay out of this run, and they are there.
    skipped = "\n".join(
        ln
        for b in README_BLOCKS
        if b.info == "bash"
        for ln in b.lines
        if not runnable(b) or (b.skip_prefix and ln.lstrip().startswith(b.skip_prefix))
    )
    assert "bash scripts/install.sh" in skipped and "python -m pytest -q" in skipped
    assert any("python -m cpmobius.main" in script_of(b) for b in RUNNABLE if b.page == "README.md"), (
        "the default run is not among the README's runnable blocks"
    )


def test_docs_pages_are_read_too():
    """Every docs page's blocks are collected under the page's own name, with the same rules."""
    pages = {b.page for b in BLOCKS}
    assert "README.md" in pages and any(p.startswith("docs/") for p in pages), pages
    assert all(_label(b).startswith(("README.md:L", "docs/")) for b in RUNNABLE)


def test_readme_is_the_front_door_of_at_most_250_lines():
    """The README stays short: details belong in docs/ (which the README's index links)."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, over {README_MAX_LINES}: move details into docs/"
    )


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    anchors = set()
    in_code = False
    for line in markdown.splitlines():
        in_code ^= line.startswith("```")
        if not in_code and re.match(r"^#{1,6} ", line):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_relative_links_of_the_readme_and_docs_point_at_files_and_headings_that_exist():
    """A moved page, results folder or renamed heading leaves no dead link behind (links only, not code spans)."""
    link = re.compile(r"\]\(([^)\s]+)\)")
    for path in PAGES:
        for target in link.findall(path.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file_part, _, anchor = target.partition("#")
            linked = path.parent / file_part if file_part else path
            assert linked.exists(), f"{_page_name(path)}: dead link {target}"
            if anchor and linked.suffix == ".md":
                assert anchor in heading_anchors(linked.read_text(encoding="utf-8")), (
                    f"{_page_name(path)}: {target} names no heading of {linked.name}"
                )


def test_heading_anchors_follow_githubs_rule():
    page = "# The two commands\n```bash\n# not a heading\n```\n### Newest (2026-12-05, two bursts): Liger's kernels\n"
    assert heading_anchors(page) == {"the-two-commands", "newest-2026-12-05-two-bursts-ligers-kernels"}


def test_parser_reads_the_three_markers():
    text = "\n".join(
        [
            "<!-- readme-test: skip — needs GPUs -->",
            "```bash",
            "nvidia-smi",
            "```",
            "",
            '<!-- readme-test: skip "python -m pytest" — CI runs the tests -->',
            "```bash",
            "echo a",
            "python -m pytest -q",
            "```",
            "<!-- readme-test: check-output -->",
            "```bash",
            "echo hi",
            "# hi",
            "```",
            "```text",
            "out",
            "```",
        ]
    )
    gpu, partial, checked, output = parse_readme(text)
    assert (gpu.skip_reason, runnable(gpu)) == ("needs GPUs", False)
    assert runnable(partial) and script_of(partial) == "echo a\n"
    assert checked.check_output and commands_with_output(checked) == [("echo hi", "hi")]
    assert output.info == "text" and not runnable(output)
    with pytest.raises(ValueError, match="neither"):
        parse_readme("<!-- readme-test: sometimes -->\n```bash\nls\n```\n")


# --------------------------------------------------------------------------- the blocks, run (slow)


def _tracked_files() -> list[str]:
    """The repository's tracked files (what a clone holds); without git, everything but ignored folders."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60).stdout
        return [p for p in out.decode().split("\0") if p and (REPO / p).is_file()]
    except (OSError, subprocess.SubprocessError):
        ignored = {
            ".git",
            ".venv",
            "outputs",
            "runs",
            "checkpoints",
            "tensorboard_log",
            "wandb",
            "build",
            "__pycache__",
            ".pytest_cache",
        }
        return [
            str(p.relative_to(REPO))
            for p in REPO.rglob("*")
            if p.is_file() and not ignored & set(p.relative_to(REPO).parts) and not p.name.endswith(".pyc")
        ]


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory, model_cache) -> tuple[Path, dict[str, str]]:
    """A copy of the tracked files with nothing beside it, and a new user's environment."""
    root = tmp_path_factory.mktemp("newcomer")
    clone = root / "cpmobius-on-verl"
    for rel in _tracked_files():
        (clone / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, clone / rel)
    assert not (clone.parent / "shared").exists()
    # The toy models the suite's other default runs pretrained (seed 0), where they did: the bytes a first run
    # makes here, reused only when their record (pretraining spec, CPU kernels, code version) is the clone's,
    # as on a user's machine. Pretraining again would repeat 3.5 minutes of the suite for the same weights.
    if (model_cache / "seed0").is_dir():
        shutil.copytree(model_cache / "seed0", root / "model_cache" / "seed0")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CPMOBIUS_", "PYTEST_"))}
    env.update(
        {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "PYTHONPATH": str(clone),
            "CPMOBIUS_CACHE": str(root / "model_cache"),
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
    )
    return clone, env


def _run(command: str, clone: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", command],
        cwd=clone,
        env=env,
        text=True,
        capture_output=True,
        timeout=BLOCK_TIMEOUT_S,
    )


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=[_label(b) for b in RUNNABLE])
def test_readme_block_runs_from_a_fresh_clone(block, fresh_clone):
    clone, env = fresh_clone
    start = time.monotonic()
    if block.check_output:
        for command, expected in commands_with_output(block):
            result = _run(command, clone, env)
            assert result.returncode == 0, f"{block.where}: {command}\n{result.stderr[-3000:]}"
            assert result.stdout.strip() == expected.strip(), f"{block.where}: {command}"
    else:
        result = _run(script_of(block), clone, env)
        assert result.returncode == 0, (
            f"{block.where} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
        )
        if DEFAULT_RUN in script_of(block).splitlines():
            assert_the_readme_table_reproduces(result.stdout)
    print(f"{block.where}: {time.monotonic() - start:.0f} s")


# The embedded default's command line in the README, and the columns of its step table that do not
# depend on the machine's speed (the rest are seconds).
DEFAULT_RUN = (
    "python -m cpmobius.main          # the embedded default: the toy world, 15 CPMöbius steps on this CPU, no download"
)
TIMING_COLUMNS = ("coach_s", "filter_s", "update_s", "val_s", "step_s")


def step_rows(text: str) -> list[list[str]]:
    """The step table's rows in ``text`` (the run's output or the README's block), without timing columns.

    Rows are the lines after the header with as many cells as it and a step number first; other lines (a
    worker's log, the run's closing lines) are passed over, and a closing fence ends the README's block.
    """
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if line.split()[:2] == ["step", "val_acc"]), None)
    assert header is not None, "no step table (a header line 'step val_acc ...')"
    names = lines[header].split()
    keep = [i for i, name in enumerate(names) if name not in TIMING_COLUMNS]
    rows = []
    for line in lines[header + 1 :]:  # a run's log lines may stand between its rows
        cells = line.split()
        if len(cells) == len(names) and cells[0].isdigit():
            rows.append([cells[i] for i in keep])
        elif line.startswith("```"):
            break
    return rows


KERNELS = re.compile(r"\[cpmobius\] CPU kernels: ([^`\n]+)")


def kernels_of(text: str) -> str | None:
    """The ``[cpmobius] CPU kernels: ...`` line's value in a run's output or the README (None when absent)."""
    match = KERNELS.search(text)
    return match[1].strip() if match else None


def readme_table() -> str:
    """The README's step table (the text block whose header starts ``step val_acc``)."""
    blocks = parse_readme(README.read_text(encoding="utf-8"))
    return "\n".join(next(b for b in blocks if b.info == "text" and "step val_acc" in "\n".join(b.lines)).lines)


def column(rows: list[list[str]], table: str, name: str) -> list[float]:
    """One column of `step_rows` output as numbers, ``table``'s header naming it (``-`` rows left out)."""
    header = next(ln.split() for ln in table.splitlines() if ln.split()[:2] == ["step", "val_acc"])
    index = [n for n in header if n not in TIMING_COLUMNS].index(name)
    return [float(row[index]) for row in rows if row[index] != "-"]


def assert_the_readme_table_reproduces(output: str) -> None:
    """The default run's table equals the README's, row for row, timing columns aside, on the CPU kernels line the
    README names (`cpmobius.cpu_kernels`): the portable kernels the default holds every process to, on a CPU of the
    README's vendor whatever its instruction set or core count. On other kernels (another vendor: an AMD EPYC gives
    another table than an Intel Xeon; another torch, ``backend.portable_kernels=false``, another architecture) the
    figures differ and the README's claims about them must still hold: 16 rows, validation accuracy ends above where it started, and the Coach's mean
    problem level over the last three steps is above that over the first three."""
    table = readme_table()
    expected, got = step_rows(table), step_rows(output)
    made_on, this_run = kernels_of(README.read_text(encoding="utf-8")), kernels_of(output)
    assert made_on and this_run, "the README or the run does not name its CPU kernels"
    if this_run != made_on:
        print(f"CPU kernels {this_run!r}, not the README's {made_on!r}: its claims checked, not its figures")
        assert [r[0] for r in got] == [r[0] for r in expected], "the run's steps are not the README's"
        accuracy, level = column(got, table, "val_acc"), column(got, table, "c_level")
        assert accuracy[-1] > accuracy[0], f"validation accuracy did not rise: {accuracy}"
        assert sum(level[-3:]) > sum(level[:3]), f"the Coach's problem level did not rise: {level}"
        return
    assert len(expected) >= 2 and got == expected, "\n".join(
        ["the default run's table differs from the README's (timings aside):", "README:"]
        + [" ".join(r) for r in expected]
        + ["this run:"]
        + [" ".join(r) for r in got]
    )


# Other CPUs, emulated on this one, as a user's environment would set them: torch's AVX2 kernels with MKL held to
# AVX2 (an AVX2-only CPU), torch's AVX-512 kernels on 16 threads (a server; a CPU without AVX-512 falls back to
# its best), torch's baseline kernels with MKL's AVX2 branch (an old CPU, MKL's path for another vendor). The run
# holds every process to the portable kernels whatever the environment says.
OTHER_CPUS = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "avx512-16-threads": {"ATEN_CPU_CAPABILITY": "avx512", "OMP_NUM_THREADS": "16"},
    "default-mkl-avx2": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AVX2"},
}


@pytest.mark.slow
@pytest.mark.parametrize("cpu", OTHER_CPUS)
def test_the_defaults_first_step_prints_the_readmes_rows_on_another_cpus_kernels(cpu, fresh_clone, tmp_path):
    """The README's table holds on any x86-64 CPU: the default's step 0 and step 1 under another CPU's kernel
    choices, from the fresh clone (its cached models, made on this machine's), equal the README's first two rows,
    every non-timing cell. The README's own block runs the whole default on this machine's kernels."""
    made_on = kernels_of(README.read_text(encoding="utf-8"))
    if f" {cpu_vendor()}, " not in made_on:  # the figures depend on the vendor: no run can match them here
        pytest.skip(f"this CPU's vendor ({cpu_vendor()}) did not make the README's table ({made_on!r})")
    clone, env = fresh_clone
    run = tmp_path / "run"
    command = (
        f"python -m cpmobius.main trainer.total_training_steps=1 trainer.default_local_dir={run} "
        f"hydra.run.dir={tmp_path / 'hydra'}"
    )
    result = _run(command, clone, {**env, **OTHER_CPUS[cpu]})
    assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    this_run = kernels_of(result.stdout)
    if this_run != made_on:
        pytest.skip(f"this run's kernels {this_run!r} are not the README's {made_on!r} (another vendor or torch)")
    assert step_rows(result.stdout) == step_rows(readme_table())[:2], result.stdout[-3000:]


def test_the_table_reader_drops_timings_and_stops_at_the_table_end():
    text = (
        "noise\nstep val_acc kept coach_s step_s\n   0   0.203    -       -      -\n(worker pid=7) a log line\n"
        "   1   0.250    8     1.2    9.9\n[cpmobius] done: 1 steps"
    )
    assert step_rows(text) == [["0", "0.203", "-"], ["1", "0.250", "8"]]
    assert any(DEFAULT_RUN in script_of(b).splitlines() for b in RUNNABLE), "the default run is not among the blocks"
    readme_rows = step_rows(README.read_text(encoding="utf-8"))
    assert [row[0] for row in readme_rows] == [str(i) for i in range(len(readme_rows))] and len(readme_rows) == 16


def test_the_table_is_compared_whole_on_the_readmes_kernels_and_by_its_claims_elsewhere():
    """Same kernels line (the vendor with it): every figure must match. Other kernels or another vendor: figures may
    move, the README's claims may not."""
    table = readme_table()
    made_on = kernels_of(README.read_text(encoding="utf-8"))
    assert made_on, "the README does not name the CPU kernels its table was made on"
    assert made_on.endswith("kernels DEFAULT, BLAS mkl COMPATIBLE, 2 threads"), f"not the portable kernels: {made_on}"
    assert_the_readme_table_reproduces(f"[cpmobius] CPU kernels: {made_on}\n{table}")
    lines = table.splitlines()
    first, last = lines[1].split(), lines[-1].split()
    moved = table.replace(lines[-1], lines[-1].replace(last[1], f"{float(last[1]) + 0.001:.3f}", 1))
    with pytest.raises(AssertionError, match="differs from the README"):
        assert_the_readme_table_reproduces(f"[cpmobius] CPU kernels: {made_on}\n{moved}")
    vendor = made_on.split(", ")[0].split(" ", 1)[1]
    for line in (made_on.replace(vendor, "OtherVendor"), "other"):  # a figure moved, the claims hold
        assert_the_readme_table_reproduces(f"[cpmobius] CPU kernels: {line}\n{moved}")
    fell = table.replace(lines[-1], lines[-1].replace(last[1], f"{float(first[1]) - 0.001:.3f}", 1))
    with pytest.raises(AssertionError, match="did not rise"):
        assert_the_readme_table_reproduces(f"[cpmobius] CPU kernels: other\n{fell}")
