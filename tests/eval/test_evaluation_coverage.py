"""Review fixes of the evaluation harness: partial coverage, uneven responses per problem, grading
failures, and the generation requests (greedy copies, prompts as token ids; CPU, no vLLM needed)."""

from __future__ import annotations

import copy
import json
import shutil
import sys
import types
from pathlib import Path

import pytest

from cpmobius.eval.cli import main
from cpmobius.eval.data import default_data_dir, encode_prompt
from cpmobius.eval.generation import (
    Completion,
    HFGenerator,
    RequestPlan,
    SamplingSettings,
    VLLMGenerator,
    left_pad,
    make_generator,
    plan_request,
    replicate,
    vllm_inputs,
    vllm_sampling_kwargs,
)
from cpmobius.eval.scoring import AVG_BENCHMARKS, score_completions
from cpmobius.eval.summary import score_run
from cpmobius.grading import GradingError
from cpmobius.jsonl import write_jsonl
from cpmobius.toy.tiny_models import build_char_tokenizer

QWEN_TOKENIZER = default_data_dir().parent / "tokenizers" / "qwen2.5-instruct"
HUGE = "\\boxed{9^{9^{9^{9}}}}"  # an astronomically large power: the grader reports "timeout" at once


def boxed(answer: str) -> str:
    return f"So the answer is $\\boxed{{{answer}}}$."


def records(bench: str, responses: dict[int, list[str]]) -> list[dict]:
    return [
        {"benchmark": bench, "problem_id": f"{bench}-{i}", "sample": j, "response": r}
        for i, rs in responses.items()
        for j, r in enumerate(rs)
    ]


def score(tmp_path: Path, recs: list[dict], data: Path, *extra: str) -> tuple[int, dict]:
    path = write_jsonl(tmp_path / "scored" / "completions.jsonl", recs)
    code = main(
        ["--completions", str(path), "--data-dir", str(data), "--bootstrap", "20", "--no-grader-report", *extra]
    )
    result_path = path.parent / "results.json"
    return code, json.loads(result_path.read_text()) if code == 0 and result_path.exists() else {}


# ----------------------------------------------------------------------------- 1. partial coverage


@pytest.fixture
def six_benchmarks(tmp_path, benchmark_dir):
    """Every Avg benchmark with problems answered 1, 2 (and aime24 a third problem, answer 3)."""
    golds = {b: ["1", "2"] for b in AVG_BENCHMARKS}
    golds["aime24"] = ["1", "2", "3"]
    return benchmark_dir(golds)


def _all_right_but_aime24_problem_2() -> list[dict]:
    # Every benchmark: problem 0 right, problem 1 wrong → avg@1 = 50. aime24's problem 2 is not in the file.
    return [r for b in AVG_BENCHMARKS for r in records(b, {0: [boxed("1")], 1: [boxed("7")]})]


def test_partial_benchmark_blocks_avg(tmp_path, six_benchmarks, capsys):
    code, result = score(tmp_path, _all_right_but_aime24_problem_2(), six_benchmarks)
    assert code == 0
    summary = result["summary"]
    aime = summary["aime24"]
    assert (aime["n_problems"], aime["n_problems_expected"], aime["complete"]) == (2, 3, False)
    assert summary["amc"]["complete"] is True and summary["amc"]["n_problems_expected"] == 2
    # aime24 is in both averages: neither is computed, and each says why.
    for name in ("Avg", "OOD Avg"):
        assert summary[name]["avg@k"] is None and summary[name]["avg@k_ci"] is None
        assert "aime24 2/3" in summary[name]["reason"] and "--allow-partial" in summary[name]["reason"]
    table = (tmp_path / "scored" / "results.md").read_text()
    assert "50.0 [0.0, 100.0]*" in table  # the partial aime24 cell is marked
    assert "* Partial: only some problems scored (scored/expected): AIME24 2/3." in table
    assert "Avg —: partial benchmarks" in table and "OOD Avg —: partial benchmarks" in table


def test_allow_partial_averages_the_slice(tmp_path, six_benchmarks):
    code, result = score(tmp_path, _all_right_but_aime24_problem_2(), six_benchmarks, "--allow-partial")
    assert code == 0
    summary = result["summary"]
    # Every benchmark is 50% on the problems scored → Avg = OOD Avg = 50, flagged as averaging aime24's slice.
    for name in ("Avg", "OOD Avg"):
        assert summary[name]["avg@k"] == pytest.approx(50.0)
        assert summary[name]["reason"] is None and summary[name]["partial_benchmarks"] == ["aime24"]
    table = (tmp_path / "scored" / "results.md").read_text()
    assert "* Avg averages partial benchmarks (--allow-partial): aime24." in table


def test_missing_benchmark_reason(tmp_path, six_benchmarks):
    # Every problem right (aime24 has 3, the others 2), AMC absent.
    recs = [
        r
        for b in AVG_BENCHMARKS
        if b != "amc"
        for r in records(b, {i: [boxed(str(i + 1))] for i in range(3 if b == "aime24" else 2)})
    ]
    code, result = score(tmp_path, recs, six_benchmarks)
    assert code == 0
    summary = result["summary"]
    assert summary["Avg"]["avg@k"] is None and summary["Avg"]["reason"] == "not scored: amc"
    # OOD Avg does not use AMC and every other benchmark is complete: 100%.
    assert summary["OOD Avg"]["avg@k"] == pytest.approx(100.0) and summary["OOD Avg"]["reason"] is None


class _FakeTokenizer:
    chat_template = "fake"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"
        return [ord(c) for c in text] if tokenize else text


class _RightAnswerGenerator:
    """Answers problem i with \\boxed{i + 1} (the fixture's gold), decoded from the prompt's token ids."""

    def __init__(self):
        self.backend, self.tokenizer = "fake", _FakeTokenizer()

    def generate(self, prompts, n, stop=(), desc=""):
        texts = ["".join(map(chr, ids)) for ids in prompts]
        return [[Completion(boxed(str(int(t.split("Problem ")[1].split("?")[0]) + 1)), 4, "stop")] * n for t in texts]


def test_limit_run_is_complete_for_its_slice(tmp_path, six_benchmarks, monkeypatch, capsys):
    import cpmobius.eval.generation as gen

    monkeypatch.setattr(gen, "make_generator", lambda *a, **kw: _RightAnswerGenerator())
    out = tmp_path / "out"
    assert (
        main(
            [
                "--model",
                str(tmp_path / "m"),
                "--label",
                "m",
                "--limit",
                "1",
                "--k",
                "2",
                "--data-dir",
                str(six_benchmarks),
                "--bootstrap",
                "10",
                "--no-grader-report",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    summary = json.loads((out / "m" / "results.json").read_text())["summary"]
    aime = summary["aime24"]
    assert (aime["n_problems"], aime["n_problems_expected"], aime["n_problems_benchmark"]) == (1, 1, 3)
    assert aime["complete"] and summary["Avg"]["avg@k"] == pytest.approx(100.0)
    table = (out / "m" / "results.md").read_text()
    assert "Slice (--limit): problems evaluated / in the benchmark: AIME24 1/3, AIME25 1/2" in table
    assert "m: Slice (--limit)" in (out / "results.md").read_text()

    # Re-scoring the run's file in place: run.json's limit applies, the slice is complete again.
    assert (
        main(
            [
                "--completions",
                str(out / "m" / "completions.jsonl"),
                "--data-dir",
                str(six_benchmarks),
                "--bootstrap",
                "10",
                "--no-grader-report",
            ]
        )
        == 0
    )
    assert json.loads((out / "m" / "results.json").read_text())["summary"]["Avg"]["avg@k"] == pytest.approx(100.0)
    assert "a --limit 1 run" in capsys.readouterr().err
    # The same file elsewhere (no run.json) is partial unless the slice is named.
    copy_path = tmp_path / "elsewhere" / "completions.jsonl"
    copy_path.parent.mkdir()
    shutil.copy(out / "m" / "completions.jsonl", copy_path)
    assert (
        main(
            [
                "--completions",
                str(copy_path),
                "--data-dir",
                str(six_benchmarks),
                "--bootstrap",
                "10",
                "--no-grader-report",
            ]
        )
        == 0
    )
    assert json.loads((copy_path.parent / "results.json").read_text())["summary"]["Avg"]["avg@k"] is None
    assert (
        main(
            [
                "--completions",
                str(copy_path),
                "--data-dir",
                str(six_benchmarks),
                "--bootstrap",
                "10",
                "--no-grader-report",
                "--limit",
                "1",
            ]
        )
        == 0
    )
    assert json.loads((copy_path.parent / "results.json").read_text())["summary"]["Avg"]["avg@k"] == pytest.approx(
        100.0
    )


# ----------------------------------------------------------------------------- 2. uneven responses per problem


def test_uneven_responses_are_an_error(tmp_path, capsys, benchmark_dir):
    data = benchmark_dir({"aime24": ["1", "2", "3"]})
    recs = records("aime24", {0: [boxed("1")] * 3, 1: [boxed("2")] * 2, 2: [boxed("3")] * 3})
    code, _ = score(tmp_path, recs, data)
    assert code == 2
    err = capsys.readouterr().err
    assert "aime24: uneven responses per problem (n_min=2, n_max=3)" in err and "aime24-1 (2)" in err
    assert "aime24-0" not in err and "--allow-uneven-k" in err and "Traceback" not in err


def test_uneven_responses_accepted_and_reported(tmp_path, benchmark_dir):
    data = benchmark_dir({"aime24": ["1", "2"]})
    # Problem 0: 1 of 3 right; problem 1: 2 of 2 right → avg@k = (1/3 + 1) / 2 = 66.67;
    # pass@2 (k = n_min = 2): problem 0: 1 − C(2, 2)/C(3, 2) = 2/3, problem 1: 1 → 83.33.
    recs = records("aime24", {0: [boxed("1"), boxed("5"), boxed("6")], 1: [boxed("2")] * 2})
    code, result = score(tmp_path, recs, data, "--allow-uneven-k")
    assert code == 0
    aime = result["summary"]["aime24"]
    assert (aime["k"], aime["n_min"], aime["n_max"]) == (2, 2, 3)
    assert aime["avg@k"] == pytest.approx(100 * (1 / 3 + 1) / 2)
    assert aime["pass@k"] == pytest.approx(100 * (2 / 3 + 1) / 2)
    assert "AIME24 2–3 (uneven; pass@k with k = 2)" in (tmp_path / "scored" / "results.md").read_text()


# ----------------------------------------------------------------------------- 3. grading failures


def test_grading_failures_counted(tmp_path, benchmark_dir):
    # Problem 0 (gold 1): right, then a timeout; problem 1 (gold "N/A", a placeholder: it loads, an empty
    # gold does not): an invalid gold → grader error on both; problem 2 (gold 3): a wrong verdict ("ok")
    # and no answer.
    data = benchmark_dir({"aime24": ["1", "N/A", "3"], "amc": ["1"]})
    recs = records("aime24", {0: [boxed("1"), HUGE], 1: [boxed("2"), "no box"], 2: [boxed("4"), "no box"]}) + records(
        "amc", {0: [boxed("1")] * 2}
    )
    code, result = score(tmp_path, recs, data)
    assert code == 0
    aime = result["summary"]["aime24"]
    assert aime["grading"] == {"ok": 2, "no_answer": 1, "timeout": 1, "error": 2}
    assert result["summary"]["amc"]["grading"] == {"ok": 2, "no_answer": 0, "timeout": 0, "error": 0}
    assert aime["avg@k"] == pytest.approx(100 / 6)  # failures count wrong: (1/2 + 0 + 0) / 3
    statuses = {p["problem_id"]: p["statuses"] for p in result["problems"]["aime24"]}
    assert statuses == {"aime24-0": ["ok", "timeout"], "aime24-1": ["error", "error"], "aime24-2": ["ok", "no_answer"]}
    table = (tmp_path / "scored" / "results.md").read_text()
    assert "Grading failures (responses, counted wrong): AIME24 1 timeouts, 2 errors." in table


def test_grading_failures_none_line(tmp_path, benchmark_dir):
    data = benchmark_dir({"aime24": ["1"]})
    code, _ = score(tmp_path, records("aime24", {0: [boxed("1")]}), data)
    assert code == 0 and "Grading failures: none." in (tmp_path / "scored" / "results.md").read_text()


def test_all_grades_failed_refuses_to_report(tmp_path, capsys, benchmark_dir):
    data = benchmark_dir({"aime24": ["1", "2"], "amc": ["1"]})
    recs = records("aime24", {0: [HUGE], 1: [HUGE]}) + records("amc", {0: [boxed("1")]})
    code, _ = score(tmp_path, recs, data)
    assert code == 1
    err = capsys.readouterr().err
    assert "evaluation of aime24" in err and "2 timeouts" in err and "Traceback" not in err
    assert not (tmp_path / "scored" / "results.json").exists()
    with pytest.raises(GradingError):
        score_completions(recs, {"aime24": {"aime24-0": ["1"], "aime24-1": ["2"]}, "amc": {"amc-0": ["1"]}})


def test_no_answer_everywhere_is_a_real_zero(tmp_path):
    # Nothing boxed is a model failure, not a grader failure: reported as 0, no error.
    rows = {"aime24": [{"id": "p", "problem": "?", "answer": "1", "alt_answers": []}]}
    result = score_run(
        [{"benchmark": "aime24", "problem_id": "p", "response": "no box"}], rows, compare=False, n_boot=5
    )
    assert result["summary"]["aime24"]["avg@k"] == 0.0
    assert result["summary"]["aime24"]["grading"]["no_answer"] == 1


# ----------------------------------------------------------------------------- 4. generation requests


@pytest.mark.parametrize(
    "n,greedy,expected", [(4, True, RequestPlan(1, 4)), (4, False, RequestPlan(4, 1)), (1, True, RequestPlan(1, 1))]
)
def test_plan_request(n, greedy, expected):
    assert plan_request(n, greedy) == expected


def test_vllm_sampling_kwargs_greedy_asks_for_one():
    kwargs, copies = vllm_sampling_kwargs(SamplingSettings(greedy=True, max_new_tokens=7), 5, ["\n###"])
    assert (kwargs["n"], kwargs["temperature"], kwargs["top_p"], copies) == (1, 0.0, 1.0, 5)
    assert kwargs["max_tokens"] == 7 and kwargs["stop"] == ["\n###"]
    kwargs, copies = vllm_sampling_kwargs(SamplingSettings(), 5)
    assert (kwargs["n"], kwargs["temperature"], kwargs["top_p"], kwargs["stop"], copies) == (5, 0.7, 0.9, None, 1)


def test_replicate_and_left_pad():
    out = replicate([[Completion("a", 1, "stop")], [Completion("b", 2, "length")]], 3)
    assert [[c.text for c in g] for g in out] == [["a"] * 3, ["b"] * 3]
    assert out[0][0] is not out[0][1]  # independent records
    assert left_pad([[5, 6, 7], [8]], 0) == ([[5, 6, 7], [0, 0, 8]], [[1, 1, 1], [0, 0, 1]])


def _llama_like_tokenizer():
    """The tiny character tokenizer with a BOS its post-processor adds, and a template that writes
    `bos_token` itself (as Llama 3 / OctoThinker templates do)."""
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    backend = copy.deepcopy(build_char_tokenizer().backend_tokenizer)
    backend.add_special_tokens(["<s>"])
    bos = backend.token_to_id("<s>")
    backend.post_processor = TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tok.chat_template = (
        "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    return tok, bos


def test_encode_prompt_one_bos_for_llama_like_templates():
    tok, bos = _llama_like_tokenizer()
    prompt = encode_prompt(tok, "What is 1 + 1?")
    assert prompt.text.startswith("<s><|im_start|>user\nWhat is 1 + 1?")
    assert tok(prompt.text).input_ids[:2] == [bos, bos]  # the hazard: text tokenized again gets a second BOS
    assert prompt.token_ids[0] == bos and prompt.token_ids.count(bos) == 1
    assert tok.decode(prompt.token_ids) == prompt.text


def _check_encoded(tok):
    prompt = encode_prompt(tok, "Find $x$ if $x + 1 = 2$.")
    assert prompt.token_ids == tok(prompt.text, add_special_tokens=False).input_ids
    assert tok.decode(prompt.token_ids) == prompt.text
    return prompt


def test_encode_prompt_tiny_tokenizer():
    prompt = _check_encoded(build_char_tokenizer())
    assert prompt.text == "<|im_start|>user\nFind $x$ if $x + 1 = 2$.<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.skipif(not QWEN_TOKENIZER.is_dir(), reason="needs ../shared/data/tokenizers/qwen2.5-instruct")
def test_encode_prompt_qwen_tokenizer():
    from transformers import AutoTokenizer

    prompt = _check_encoded(AutoTokenizer.from_pretrained(str(QWEN_TOKENIZER)))
    assert prompt.text.startswith("<|im_start|>system\n") and prompt.text.endswith("<|im_start|>assistant\n")


def test_vllm_generator_requests_ids_and_greedy_copies(monkeypatch):
    """VLLMGenerator against a stand-in `vllm` module: what it asks of the engine, what it returns."""
    calls = []

    class SamplingParams:
        def __init__(self, **kwargs):
            self.__dict__.update(kwargs)

    class LLM:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

        def get_tokenizer(self):
            return build_char_tokenizer()

        def generate(self, inputs, params, use_tqdm=True):
            calls.append((inputs, params))
            out = types.SimpleNamespace
            return [
                out(outputs=[out(text=f"r{i}.{j}", token_ids=[1, 2], finish_reason="stop") for j in range(params.n)])
                for i in range(len(inputs))
            ]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    gen = VLLMGenerator("some/model", SamplingSettings(greedy=True, max_new_tokens=8))
    prompts = [encode_prompt(gen.tokenizer, p).token_ids for p in ("a?", "b?")]
    out = gen.generate(prompts, 3)
    inputs, params = calls[-1]
    assert inputs == [{"prompt_token_ids": prompts[0]}, {"prompt_token_ids": prompts[1]}]
    assert (params.n, params.temperature) == (1, 0.0)
    assert [[c.text for c in g] for g in out] == [["r0.0"] * 3, ["r1.0"] * 3]
    sampled = VLLMGenerator("some/model", SamplingSettings(max_new_tokens=8)).generate(prompts, 3)
    assert calls[-1][1].n == 3 and [c.text for c in sampled[1]] == ["r1.0", "r1.1", "r1.2"]
    assert vllm_inputs([(1, 2)]) == [{"prompt_token_ids": [1, 2]}]


def test_engine_args_reach_vllm_and_name_their_clashes(monkeypatch, capsys):
    """``--engine-args``: parsed as a JSON object, passed to `vllm.LLM` beside the dedicated options, refused where
    a dedicated option owns the key or the backend is HF, and stated in the results' generation note."""
    from cpmobius.eval.options import build_parser
    from cpmobius.eval.report import generation_note

    seen = []

    class LLM:
        def __init__(self, **kwargs):
            seen.append(kwargs)
            if "speculative_config" in kwargs:  # as vLLM does: the dict it is given gains the target's config
                kwargs["speculative_config"]["target_model_config"] = object()
            raise _Stop

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=None))
    wide = {"max_num_seqs": 1024, "speculative_config": {"method": "ngram", "num_speculative_tokens": 4}}
    args = build_parser().parse_args(["--model", "m", "--engine-args", json.dumps(wide)])
    assert args.engine_args == wide
    with pytest.raises(_Stop):
        make_generator("some/model", SamplingSettings(), "vllm", engine_args=args.engine_args, max_model_len=4096)
    assert seen[-1]["max_num_seqs"] == 1024 and seen[-1]["speculative_config"]["method"] == "ngram"
    assert seen[-1]["max_model_len"] == 4096 and seen[-1]["model"] == "some/model"
    assert args.engine_args == wide and json.dumps(args.engine_args)  # what run.json records: left as it was given
    for clash, option in (({"gpu_memory_utilization": 0.5}, "--gpu-memory-utilization"), ({"seed": 3}, "--seed")):
        with pytest.raises(ValueError, match=option):
            make_generator("some/model", SamplingSettings(), "vllm", engine_args=clash)
    with pytest.raises(ValueError, match="max_model_len"):  # its option unset: still its option's key
        make_generator("some/model", SamplingSettings(), "vllm", engine_args={"max_model_len": 2048})
    assert len(seen) == 1  # no clash reached the engine
    with pytest.raises(ValueError, match="HF backend"):
        make_generator("some/model", SamplingSettings(), "hf", engine_args=wide)
    for bad in ("[1, 2]", "{max_num_seqs: 1}"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["--model", "m", "--engine-args", bad])
        assert "--engine-args" in capsys.readouterr().err
    note = generation_note({"sampling": SamplingSettings().as_dict(), "engine_args": {"max_num_seqs": 1024}})
    assert note.endswith('vLLM engine arguments {"max_num_seqs": 1024}.')


def test_hf_generator_greedy_decodes_once_per_prompt(model_cache):
    from cpmobius.toy.tiny_models import materialize_tiny_model

    model = materialize_tiny_model(model_cache / "eval-coverage-tiny", seed=5)
    gen = HFGenerator(str(model), SamplingSettings(greedy=True, max_new_tokens=4), device="cpu", batch_size=8)
    rows = []
    original = gen.net.generate

    def counting_generate(**kwargs):
        rows.append(kwargs["input_ids"].tolist())
        return original(**kwargs)

    gen.net.generate = counting_generate
    prompts = [encode_prompt(gen.tokenizer, p).token_ids for p in ("1+1?", "What is 12 * 3?")]
    out = gen.generate(prompts, 3)
    assert [len(g) for g in out] == [3, 3] and all(len({c.text for c in g}) == 1 for g in out)
    # One batch, one row per prompt (longest first), the ids exactly as encoded, left-padded.
    assert len(rows) == 1 and len(rows[0]) == 2
    pad = gen.tokenizer.pad_token_id
    assert [[t for t in r if t != pad] for r in rows[0]] == [prompts[1], prompts[0]]


class _Stop(Exception):
    """Raised by a stubbed loader once it has recorded its arguments."""


def test_checkpoint_code_runs_only_when_asked(monkeypatch):
    # A downloaded checkpoint's own Python code must not run by default, on either backend.
    import transformers

    from cpmobius.eval.options import build_parser

    seen = []

    def record(*args, **kwargs):
        seen.append(kwargs.get("trust_remote_code"))
        raise _Stop

    class LLM:
        def __init__(self, **kwargs):
            record(**kwargs)

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", record)
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=None))
    for backend in ("hf", "vllm"):
        for asked in ({}, {"trust_remote_code": True}):
            with pytest.raises(_Stop):
                make_generator("some/model", SamplingSettings(), backend, **asked)
    assert seen == [False, True, False, True]
    assert build_parser().parse_args(["--model", "m"]).trust_remote_code is False
    assert build_parser().parse_args(["--model", "m", "--trust-remote-code"]).trust_remote_code is True


def test_training_loads_models_without_their_code():
    from cpmobius.config import compose_config
    from cpmobius.engine.config import policy_config

    cfg = compose_config(["model=qwen2p5_math_1p5b"])
    assert [policy_config(cfg, role).actor_rollout_ref.model.trust_remote_code for role in ("coach", "player")] == [
        False,
        False,
    ]
