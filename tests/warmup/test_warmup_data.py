"""Coach warm-up data preparation (`cpmobius.warmup.data`, `cpmobius.warmup.sources`,
`scripts/prepare_warmup_data.py`) on a synthetic fixture in the Eurus-2-RL-Data schema (no real file
is reachable offline)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cpmobius.eval.data import default_data_dir
from cpmobius.settings import CoachSettings
from cpmobius.warmup import data as wd
from cpmobius.warmup import sources

REPO = Path(__file__).resolve().parents[2]
SHARED_AMC = default_data_dir() / "amc" / "amc.jsonl"
# PRIME's math prompt (Eurus-2-7B-SFT model card): {question} + this.
SUFFIX = "\n\nPresent the answer in LaTex format: \\boxed{Your answer}"
SYSTEM = "When tackling complex reasoning tasks, you have access to the following actions. [ASSESS] [ADVANCE] [OUTPUT]"
CODE_SUFFIX = "\n\nWrite Python code to solve the problem. Present the code in \n```python\nYour code\n```\nat the end."
SOURCES = ("numina_cn_k12", "numina_olympiads", "numina_synthetic_math")
TOYBENCH = (
    "A regular hexagon with side length 6 is inscribed in a circle and a point is chosen uniformly at random "
    "inside the circle. What is the probability that the point lies inside the hexagon?"
)
NUM = 10


def eurus_row(
    problem: str, data_source: str = "numina_cn_k12", suffix: str = SUFFIX, ability: str = "math", gt: str = "1"
):
    return {
        "data_source": data_source,
        "prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": problem + suffix}],
        "ability": ability,
        "reward_model": {"style": "rule", "ground_truth": gt},
        "extra_info": {"split": "train", "index": 0},
    }


def filler(i: int) -> str:
    return (
        f"A bag holds {i + 3} red marbles and {2 * i + 5} blue marbles. Two marbles are drawn at random "
        f"without replacement. What is the probability that both are red?"
    )


def amc_problem() -> str | None:
    if not SHARED_AMC.is_file():
        return None
    return json.loads(SHARED_AMC.read_text(encoding="utf-8").splitlines()[0])["problem"]


@pytest.fixture
def fixture(tmp_path):
    """(rows, eval_dir, expected pool texts, has_amc)."""
    eval_dir = tmp_path / "eval"
    (eval_dir / "toybench").mkdir(parents=True)
    (eval_dir / "toybench" / "toybench.jsonl").write_text(json.dumps({"id": "toy-0", "problem": TOYBENCH}) + "\n")
    amc = amc_problem()
    if amc is not None:
        (eval_dir / "amc").mkdir()
        shutil.copy(SHARED_AMC, eval_dir / "amc" / "amc.jsonl")
    rows = [eurus_row(filler(i), SOURCES[i % 3], gt=f"\\frac{{{i + 3}}}{{{i + 97}}}") for i in range(24)]
    near_miss = "A regular hexagon with side length 6 is inscribed in a triangle. Find the area of the triangle."
    no_suffix = "Let $f(x) = x^2 - 4x + 7$. Find   the minimum value\tof $f$ over all real $x$."
    rows += [
        eurus_row("Given a list of integers, return the largest one.", "taco", CODE_SUFFIX, "code"),
        eurus_row("Read n and print n squared.", "codecontests", CODE_SUFFIX, "code"),
        eurus_row(
            "  a BAG holds 3 red marbles and 5 blue   marbles. Two marbles are drawn at random without "
            "replacement. What is the probability that both are red?  "
        ),  # duplicate of filler(0)
        eurus_row(filler(1), "numina_olympiads"),  # exact duplicate
        eurus_row("Find $x$.", "numina_synthetic_math"),  # too short
        eurus_row("Compute " + " + ".join(str(k) for k in range(400)) + ".", "numina_synthetic_math"),  # too long
        eurus_row(
            "Consider this: a regular hexagon with side length 6 is inscribed in a circle and a point is "
            "chosen at random. Find the area of the circle.",
            "numina_olympiads",
        ),  # 16 shared words
        eurus_row(near_miss, "numina_olympiads"),  # only 11 shared words: kept
        eurus_row("Compute $7 \\times 8$, which is \\boxed{56}. What is the product?"),  # leaks its answer
        eurus_row("(a) Find x if 2x = 4 and x is real. (b) Find y if 3y = 9 and y is positive."),  # several problems
        {
            "data_source": "numina_cn_k12",
            "prompt": [{"role": "system", "content": SYSTEM}],
            "ability": "math",
            "reward_model": {"ground_truth": "0"},
            "extra_info": {},
        },  # no user message
        eurus_row(no_suffix, "numina_cn_k12", suffix=""),
    ]
    if amc is not None:
        rows.append(eurus_row(amc, "numina_amc_aime", gt="142"))
    pool = [filler(i) for i in range(24)] + [
        near_miss,
        "Let $f(x) = x^2 - 4x + 7$. Find the minimum value of $f$ over all real $x$.",
    ]
    return rows, eval_dir, pool, amc is not None


def expected_drops(has_amc: bool) -> dict:
    drops = {
        "benchmark_overlap/toybench": 1,
        "coach_validator/leaks_answer": 1,
        "coach_validator/several_problems": 1,
        "duplicate": 2,
        "no_problem": 1,
        "not_math": 2,
        "too_long": 1,
        "too_short": 1,
    }
    if has_amc:
        drops["benchmark_overlap/amc"] = 1
    return dict(sorted(drops.items()))


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("Find $x$ if $2x=4$." + SUFFIX, ("Find $x$ if $2x=4$.", True)),
        (
            "Find $x$ if $2x=4$.\n\nPresent the answer in LaTeX format: \\boxed{Your answer}\n",
            ("Find $x$ if $2x=4$.", True),
        ),
        (
            "Find $x$ if $2x=4$. Let's think step by step and output the final answer within \\boxed{}.",
            ("Find $x$ if $2x=4$.", True),
        ),
        ("  Find  $x$.\n\n\n\nThen\t$y$. ", ("Find $x$.\n\nThen $y$.", False)),
    ],
)
def test_extract_problem_strips_system_prompt_and_suffix(content, expected):
    prompt = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": content}]
    assert sources.extract_problem(prompt) == expected


def test_extract_problem_without_user_message():
    assert sources.extract_problem([{"role": "system", "content": SYSTEM}]) == (None, False)
    assert sources.extract_problem(None) == (None, False)


@pytest.mark.parametrize(
    ("row", "math"),
    [
        ({"data_source": "numina_cn_k12", "ability": "math"}, True),
        ({"data_source": "numina_olympiads"}, True),
        ({"data_source": "taco", "ability": "code"}, False),
        ({"data_source": "numina_x", "ability": "code"}, False),
    ],
)
def test_is_math_row(row, math):
    assert sources.is_math_row(row) is math


def test_overlap_rule_thresholds():
    index = sources.OverlapIndex([sources.BenchmarkProblem("toybench", "toy-0", TOYBENCH)], ngram=13)
    # 13 consecutive words shared ("a regular ... circle and") → overlap; 12 ("a regular ... circle") → none.
    hits, shared = index.match("Hmm: a regular hexagon with side length 6 is inscribed in a circle and a. Find it?")
    assert (
        hits == {("toybench", "toy-0")}
        and shared == "a regular hexagon with side length 6 is inscribed in a circle and"
    )
    assert index.match("A regular hexagon with side length 6 is inscribed in a circle, or z. Find it?")[0] == set()
    # Short problems: 8..12 words must occur as a whole inside the benchmark problem; < 8 words must equal it.
    assert index.match("What is the probability that the point lies inside the hexagon?")[0] == {("toybench", "toy-0")}
    assert index.match("Inside the hexagon?")[0] == set()
    short = sources.OverlapIndex([sources.BenchmarkProblem("b", "b-0", "Find $x$ if $2x = 4$.")])
    assert short.match("find x, if 2x=4")[0] == {("b", "b-0")}


def test_boilerplate_alone_is_no_overlap_but_a_verbatim_copy_is():
    tail = " where m and n are relatively prime positive integers. Find m+n."
    bench = [
        sources.BenchmarkProblem(
            "b1", "b1-0", "A fair coin is tossed ten times; the chance of no two heads in a row is m/n," + tail
        ),
        sources.BenchmarkProblem(
            "b2", "b2-0", "A circle of radius 3 is tangent to two sides of a unit square; its area is m/n," + tail
        ),
    ]
    index = sources.OverlapIndex(bench)
    # "in a row is m n where m ... find m n" is in b1 only; "is m n where ... find m n" (13 words) is in both.
    assert index.match("The probability that a die shows six is m/n," + tail)[0] == set()
    assert index.match(bench[0].problem + " Give the answer as an integer.")[0] == {("b1", "b1-0")}  # rule (a)/(c)
    assert index.match("The chance of no two heads in a row is m/n," + tail)[0] == {("b1", "b1-0")}  # a suffix of b1


def test_every_benchmark_problem_overlaps_itself():
    if not SHARED_AMC.is_file():
        pytest.skip("no shared benchmark copies")
    benchmarks = sources.load_benchmarks(SHARED_AMC.parents[1])
    index = sources.OverlapIndex(benchmarks)
    assert [b.id for b in benchmarks if (b.benchmark, b.id) not in index.match(b.problem)[0]] == []


def test_filter_and_select_on_the_fixture(fixture):
    rows, eval_dir, pool, has_amc = fixture
    benchmarks = sources.load_benchmarks(eval_dir)
    sft_rows, manifest = wd.prepare_warmup_data(rows, benchmarks, num=NUM, seed=0)

    assert manifest["drops"] == expected_drops(has_amc)
    assert manifest["pool"] == len(pool) == 26
    assert manifest["rows_in"] == len(rows)
    # Every math row with a user message except the no-suffix one had PRIME's suffix.
    assert manifest["suffix_stripped"] == len(rows) - 2 - 1 - 1
    overlaps = {tuple(o["benchmarks"]): o for o in manifest["benchmark_overlaps"]}
    assert overlaps[("toybench",)]["benchmark_ids"] == ["toy-0"] and overlaps[("toybench",)]["source_row"] == 30
    if has_amc:
        assert (
            overlaps[("amc",)]["benchmark_ids"] == ["amc-0"] and overlaps[("amc",)]["data_source"] == "numina_amc_aime"
        )
    before = manifest["rows_by_data_source"]["before"]
    assert before["taco"] == 1 and before["codecontests"] == 1 and sum(before.values()) == len(rows)
    assert manifest["rows_by_data_source"]["pool"] == {
        "numina_cn_k12": 9,
        "numina_olympiads": 9,
        "numina_synthetic_math": 8,
    }
    assert sum(manifest["rows_by_data_source"]["after"].values()) == NUM

    # Selection = random.Random(seed).sample(pool sorted by lower-cased text, N), as documented.
    expected = random.Random(0).sample(sorted(pool, key=str.lower), NUM)
    assert [r["messages"][1]["content"] for r in sft_rows] == expected
    instruction = CoachSettings().instruction
    ground_truths = [r["reward_model"]["ground_truth"] for r in rows]
    for row in sft_rows:
        user, assistant = row["messages"]
        assert user == {"role": "user", "content": instruction}
        assert assistant["role"] == "assistant" and "Present the answer" not in assistant["content"]
        assert "\\boxed" not in assistant["content"] and SYSTEM not in assistant["content"]
        assert not any(gt in assistant["content"] for gt in ground_truths if gt.startswith("\\frac"))


def test_selection_is_deterministic_and_order_free(fixture):
    rows, eval_dir, _, _ = fixture
    benchmarks = sources.load_benchmarks(eval_dir)
    first = wd.prepare_warmup_data(rows, benchmarks, num=NUM, seed=3)[0]
    shuffled = list(rows)
    random.Random(1).shuffle(shuffled)
    texts = lambda out: [r["messages"][1]["content"] for r in out]  # noqa: E731
    assert texts(wd.prepare_warmup_data(rows, benchmarks, num=NUM, seed=3)[0]) == texts(first)
    assert texts(wd.prepare_warmup_data(shuffled, benchmarks, num=NUM, seed=3)[0]) == texts(first)
    assert texts(wd.prepare_warmup_data(rows, benchmarks, num=NUM, seed=4)[0]) != texts(first)


def test_too_few_problems_names_the_count(fixture):
    rows, eval_dir, _, _ = fixture
    with pytest.raises(
        wd.NotEnoughProblemsError, match=r"only 26 problems remain after filtering, 27 requested.*duplicate: 2"
    ):
        wd.prepare_warmup_data(rows, sources.load_benchmarks(eval_dir), num=27)


def test_missing_inputs_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="source file not found"):
        sources.read_rows(tmp_path / "nope.parquet")
    with pytest.raises(FileNotFoundError, match="no benchmark JSONL"):
        sources.load_benchmarks(tmp_path)


def test_cli_writes_parquet_and_manifest_deterministically(fixture, tmp_path, capsys, load_script):
    rows, eval_dir, _, has_amc = fixture
    source = tmp_path / "eurus.parquet"
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows), source)
    args = ["--source", str(source), "--eval-dir", str(eval_dir), "--num", str(NUM), "--seed", "0"]
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "prepare_warmup_data.py"), *args, "--out", str(tmp_path / "a")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "a" / "coach_warmup.parquet"
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["output"]["sha256"] == sources.file_sha256(out) and manifest["output"]["rows"] == NUM
    assert manifest["source"] == {"kind": "file", "path": str(source), "sha256": sources.file_sha256(source)}
    assert manifest["drops"] == expected_drops(has_amc) and manifest["num"] == NUM and manifest["seed"] == 0
    assert manifest["coach_instruction"] == CoachSettings().instruction
    assert sorted(manifest["eval_files"]) == (["amc/amc.jsonl"] if has_amc else []) + ["toybench/toybench.jsonl"]
    table = pq.read_table(out).to_pylist()
    assert [r["messages"][0]["content"] for r in table] == [CoachSettings().instruction] * NUM

    # Same input, same seed → same bytes (in-process run of the same CLI; JSONL source gives the same rows).
    jsonl = tmp_path / "eurus.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    script = load_script("scripts/prepare_warmup_data.py")
    assert script.main(["--source", str(jsonl), *args[2:], "--out", str(tmp_path / "b" / "w.parquet"), "--quiet"]) == 0
    assert sources.file_sha256(tmp_path / "b" / "w.parquet") == manifest["output"]["sha256"]

    assert (
        script.main(["--source", str(source), *args[2:4], "--num", "1000", "--out", str(tmp_path / "c"), "--quiet"])
        == 2
    )
    assert "only 26 problems remain after filtering, 1000 requested" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
    assert script.main(["--source", str(tmp_path / "missing.jsonl"), *args[2:4], "--out", str(tmp_path / "d")]) == 2
    assert "source file not found" in capsys.readouterr().err
