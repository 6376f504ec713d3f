"""Nothing from a model, a completions file, a benchmark file or a config runs as code.

1. The package's code (`ast` over every ``cpmobius/**/*.py``) calls no Python evaluator: ``eval``,
   ``exec``, ``compile``, ``__import__``, sympy's ``parse_expr`` / ``sympify`` / ``S(...)`` /
   ``parse_latex`` / ``lambdify``, pickle-family loads, ``torch.load`` without ``weights_only=True``,
   ``numpy.load(allow_pickle=True)``, ``yaml.load``.
2. `cpmobius.grading.safe_sympy`: the whitelist parser builds sympy's own objects from mathematical
   text and refuses code; `install()` makes sympy's parser eval-free for a whole process.
3. Boxed payloads through every grading mode (`grade`, `grade_batch`, `answers_equivalent`), the
   majority vote, ``python -m cpmobius.grading`` and ``python -m cpmobius.eval --completions`` (its
   default path grades with both graders): each still gets a verdict, and no marker file appears.
4. The toy world's arithmetic (`cpmobius.toy.world.integer_arithmetic`) is read from the syntax tree.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cpmobius.eval.cli import main as eval_main
from cpmobius.eval.data import default_data_dir
from cpmobius.grading import STATUSES, answers_equivalent, grade, grade_batch, majority_vote
from cpmobius.grading.results import MODES
from cpmobius.jsonl import write_jsonl

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "cpmobius"

# ----------------------------------------------------------------------------- 1. the package's code

RUNS_TEXT = {"eval", "exec", "compile", "__import__", "execfile"}
"""Builtins that run a string as Python: never called, never passed around by name."""
SYMPY_RUNS_TEXT = {"parse_expr", "sympify", "parse_latex", "lambdify", "eval_expr"}
"""sympy's string → code paths (`parse_expr` and `sympify` call `eval`; `lambdify` calls `exec`)."""
PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "marshal", "joblib", "shelve"}


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _keyword_is(call: ast.Call, name: str, value: object) -> bool:
    return any(k.arg == name and isinstance(k.value, ast.Constant) and k.value.value is value for k in call.keywords)


def _pickles_allowed(call: ast.Call) -> bool:
    """numpy.load given allow_pickle other than a literal False (its default, False, is safe)."""
    return any(k.arg == "allow_pickle" for k in call.keywords) and not _keyword_is(call, "allow_pickle", False)


def code_runners(source: str, filename: str = "<code>") -> list[str]:
    """Every place in `source` that may run text as code, as "file:line: what"."""
    found = []

    def flag(node: ast.AST, what: str) -> None:
        found.append(f"{filename}:{getattr(node, 'lineno', '?')}: {what}")

    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Call):
            func, name = node.func, _name(node.func)
            owner = _name(func.value) if isinstance(func, ast.Attribute) else None
            if isinstance(func, ast.Name) and name in RUNS_TEXT | {"S"}:
                flag(node, f"{name}(...)")
            elif isinstance(func, ast.Attribute) and name == "S" and owner in ("sympy", "sp"):
                flag(node, "sympy.S(...) (sympify)")
            elif name in ("unsafe_load", "full_load", "read_pickle", "Unpickler", "run_path", "run_module"):
                flag(node, f"{name}(...)")
            elif name in ("load", "loads") and owner in PICKLE_MODULES:
                flag(node, f"{owner}.{name}(...) (unpickles)")
            elif name == "load" and owner == "torch" and not _keyword_is(node, "weights_only", True):
                flag(node, "torch.load(...) without weights_only=True (unpickles)")
            elif name == "load" and owner in ("np", "numpy") and _pickles_allowed(node):
                flag(node, "numpy.load(..., allow_pickle=...) (unpickles)")
            elif name == "load" and owner == "yaml":
                flag(node, "yaml.load(...) (use yaml.safe_load)")
            elif name == "getattr" and any(
                isinstance(a, ast.Constant) and a.value in RUNS_TEXT | SYMPY_RUNS_TEXT for a in node.args[1:2]
            ):
                flag(node, "getattr(..., a code runner)")
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            name = _name(node)
            if name in SYMPY_RUNS_TEXT or (isinstance(node, ast.Name) and name in RUNS_TEXT):
                flag(node, f"{name} (a code runner)")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = getattr(node, "module", None) or ""
            for alias in node.names:
                if alias.name in SYMPY_RUNS_TEXT or alias.name == "Unpickler":
                    flag(node, f"import of {alias.name}")
                elif module in PICKLE_MODULES and alias.name in ("load", "loads"):
                    flag(node, f"import of {module}.{alias.name}")
    return found


@pytest.mark.parametrize(
    "bad",
    [
        "eval(x)",
        "exec(x)",
        "compile(x, 'f', 'eval')",
        "__import__(x)",
        "g = eval",
        "sympy.sympify(x)",
        "f = sympy.sympify",
        "sympy.S(x)",
        "S(x)",
        "sympy.parsing.sympy_parser.parse_expr(x)",
        "parse_expr(x, evaluate=False)",
        "sympy.lambdify(a, b)",
        "from sympy import sympify as s",
        "from sympy.parsing.sympy_parser import parse_expr",
        "from pickle import loads",
        "pickle.load(f)",
        "pickle.loads(b)",
        "marshal.loads(b)",
        "dill.load(f)",
        "torch.load(p)",
        "torch.load(p, weights_only=False)",
        "np.load(p, allow_pickle=True)",
        "yaml.load(t)",
        "getattr(builtins, 'eval')(x)",
    ],
)
def test_the_checker_sees_a_code_runner(bad):
    assert code_runners(bad), bad


@pytest.mark.parametrize(
    "good",
    [
        "re.compile('x')",
        "model.eval()",
        "ast.literal_eval('1')",
        "torch.load(p, weights_only=True)",
        "np.load(p)",
        "yaml.safe_load(t)",
        "json.loads(t)",
        "sp.compile = keep",
        "parse_math_expression(t)",
        "import pickle",
        "x = pickle.UnpicklingError",
    ],
)
def test_the_checker_lets_safe_code_be(good):
    assert code_runners(good) == []


def test_no_package_code_runs_text_as_code():
    """The whole package: no eval / exec / compile / parse_expr / sympify / unpickling of data."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += code_runners(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    assert found == [], "code that may run text as code:\n" + "\n".join(found)


# ----------------------------------------------------------------------------- 2. safe_sympy

MATH_TEXT = [
    "1",
    "-3/4",
    "x**2 + 3*x - 1",
    "x^2 + 1",
    "2*sqrt(3)/3",
    "sin(pi/6) + cos(x)**2",
    "exp(2) - E",
    "log(8, 2)",
    "5!",
    "3!!",
    "0.[3]",
    "1.5e-3",
    "2j + 1",
    "(1, 2, 3)",
    "[1, 2]",
    "1, 2, ..., n",
    "x < 3",
    "1 < 2",
    "Abs(-2) + abs(x)",
    "max(1, 2) + min(x, y)",
    "f(x) + g(1, 2)",
    "Interval(0, 1)",
    "oo",
    "-oo",
    "x = 5",
    "(3 +) 4",
    "pi*r**2",
    "binomial(10, 3)/factorial(4)",
    "Rational(1, 3) + Integer(2)",
    "1 - (2 - (3 - 4))",
    "a*b/c**d",
    "lambda x: x**2",
    "I**2",
    "x & y | z",
    "{x: 1}",
    "{1, 2}",
    "N - n",  # sympy's function N minus a symbol: a TypeError in both
    "(a+5)(b+2)",  # calling an Add: a TypeError in both
    "np.arcsin(10/13)",  # a Symbol np has no arcsin: an AttributeError in both
]

PAYLOADS = [
    "__import__('pathlib').Path('{m}').touch()",
    "__import__('os').system('touch {m}')",
    "(lambda: __import__('os').system('touch {m}'))()",
    "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'Popen'][0](['touch', '{m}'])",
    "exec(\"__import__('os').system('touch {m}')\")",
    "eval(\"__import__('os').system('touch {m}')\")",
    "val(\"__import__('os').system('touch {m}')\")",
    'sympify(\'__import__("os").system("touch {m}")\')',
    'ympify(\'__import__("os").system("touch {m}")\')',
    'S(\'__import__("os").system("touch {m}")\')',
    "Symbol('x').subs(1, __import__('os').system('touch {m}'))",
    "x + __import__('os').system('touch {m}')",
    "x^2 == __import__('os').system('touch {m}')",
    "1/2 + getattr(__builtins__, 'exec')(\"open('{m}', 'w')\")",
    '(\'__import__("os").system("touch {m}")\',)',
    "open('{m}', 'w')",
    'sin(\'__import__("os").system("touch {m}")\')',
    "\uff45\uff56\uff41\uff4c(\"__import__('os').system('touch {m}')\")",  # full-width "eval": NFKC → eval
    "x = __import__('os').system('touch {m}')",
    "\\text{__import__('os').system('touch {m}')}",
    "\\mathrm{__import__('pathlib').Path('{m}').touch()}",
    "\\operatorname{eval}(\"__import__('os').system('touch {m}')\")",
    "\\frac{__import__('os').system('touch {m}')}{2}",
]


def payloads(folder: Path) -> list[str]:
    """`PAYLOADS`, each writing its own marker file in `folder` if it ever ran."""
    folder.mkdir(parents=True, exist_ok=True)
    return [p.replace("{m}", str(folder / f"M{i}")) for i, p in enumerate(PAYLOADS)]


def assert_nothing_ran(folder: Path) -> None:
    assert sorted(p.name for p in folder.iterdir()) == [], "a payload ran"


@pytest.mark.parametrize("evaluate", [True, False])
def test_parse_math_expression_builds_what_sympys_parse_expr_builds(evaluate):
    """Trusted text: sympy's parse_expr (eval) and the whitelist interpreter give the same objects, or both fail."""
    import sympy
    from sympy.parsing.sympy_parser import parse_expr as sympy_parse_expr  # the reference, in a test only

    from cpmobius.grading.safe_sympy import parse_math_expression

    def outcome(f, s):
        try:
            value = f(s, evaluate=evaluate)
        except Exception as error:  # noqa: BLE001 - the kind of failure need not match, failing does
            return ("error", type(error).__name__)
        return ("ok", sympy.srepr(value) if isinstance(value, sympy.Basic) else repr(value))

    for s in MATH_TEXT:
        ours, theirs = outcome(parse_math_expression, s), outcome(sympy_parse_expr, s)
        assert ours == theirs or (ours[0] == theirs[0] == "error"), s


BENCHMARKS = ("aime24", "aime25", "amc", "amc23", "math500", "minerva_math", "olympiadbench")


def benchmark_answer_texts() -> set[str]:
    """Every text the released grader may parse from the curated benchmarks' answers (gold, alternative
    answers, released key; as the gold, as an extracted answer, and the sides of an equation)."""
    from cpmobius.eval.data import _as_list, load_benchmark
    from cpmobius.grading.released import _extract_answer, normalize_gold

    texts = set()
    for name in BENCHMARKS:
        for row in load_benchmark(name, default_data_dir()):
            forms = [row["answer"], *(row.get("alt_answers") or []), *_as_list(row.get("answer_upstream") or [])]
            for form in map(str, forms):
                for text in (form.strip(), normalize_gold(form), _extract_answer("\\boxed{" + form + "}")):
                    texts.update({text.strip(), text.replace("\\\\", "\\").strip()})
                    if text.count("=") == 1:
                        left, right = text.split("=")
                        texts.update({right.strip(), f"{left.strip()} - ({right.strip()})"})
    return texts


@pytest.mark.skipif(not (default_data_dir() / "aime24" / "aime24.jsonl").exists(), reason="needs ../shared/data")
def test_parse_math_expression_reads_every_benchmark_answer_as_sympy_does():
    """The released grader's verdicts cannot change: every benchmark answer text either parses to the very
    object sympy's parse_expr builds, or fails in both. Only texts the whitelist accepted in full (no code
    in them) are handed to sympy's eval-based parser for the comparison."""
    import warnings

    import sympy
    from sympy.parsing.sympy_parser import parse_expr as sympy_parse_expr  # the reference, in a test only

    from cpmobius.grading.safe_sympy import UnsafeExpression, parse_math_expression, to_sympy

    refused, differ = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for text in sorted(benchmark_answer_texts()):
            for ours, theirs in ((parse_math_expression, sympy_parse_expr), (to_sympy, sympy.sympify)):
                try:
                    value = ours(text)
                except UnsafeExpression:
                    refused.append(text)
                    continue
                except Exception:  # noqa: BLE001 - unparsable: the released grader tries LaTeX next
                    continue
                reference = theirs(text)
                if sympy.srepr(value) != sympy.srepr(reference):
                    differ.append((text, value, reference))
    assert refused == [] and differ == []


def test_parse_math_expression_refuses_code(tmp_path):
    from cpmobius.grading.safe_sympy import UnsafeExpression, parse_math_expression, to_sympy

    markers = tmp_path / "markers"
    refused = 0
    for payload in payloads(markers):
        for parse in (parse_math_expression, to_sympy):
            try:
                parse(payload)  # a LaTeX payload may read as mathematics (a product of letters): harmless
            except UnsafeExpression:
                refused += 1
            except (SyntaxError, TypeError, ValueError, NameError, AttributeError):
                pass
    assert refused >= len(PAYLOADS)  # most are refused as code, not merely unparsable
    assert_nothing_ran(markers)
    with pytest.raises(UnsafeExpression):
        parse_math_expression(f"__import__('pathlib').Path('{markers / 'X'}').touch()")
    assert_nothing_ran(markers)
    # A name off the whitelist is an inert placeholder: it prints and compares as the object would, never runs.
    import builtins

    placeholder = parse_math_expression("open")
    assert repr(placeholder) == repr(builtins.open) and placeholder == parse_math_expression("open")
    assert not callable(placeholder) and not hasattr(placeholder, "__call__")
    for text in ("open('x', 'w')", "N(2)", "Symbol('x').subs(x, 1)", "x.args", "(1, 2)[0]", "f'{x}'"):
        with pytest.raises(UnsafeExpression):
            parse_math_expression(text)


def test_install_makes_sympys_own_parser_eval_free(tmp_path):
    """After `install()`, sympify(str), Number(str), Expr.equals(str), parse_expr(evaluate=False) and
    math-verify's plain-expression parse neither run a payload nor lose their mathematics (a fresh process)."""
    markers = tmp_path / "markers"
    payload = payloads(markers)[0]
    script = f"""
import sympy, math_verify
from math_verify.parser import ExprExtractionConfig
from sympy.parsing.sympy_parser import parse_expr
from cpmobius.grading import safe_sympy
safe_sympy.install()
assert safe_sympy.installed()
payload = {payload!r}
x = sympy.Symbol("x")
assert sympy.sympify("x^2 + 2*x") == x**2 + 2*x
assert sympy.Number("12") == 12 and sympy.Rational("1/3") == sympy.Rational(1, 3)
assert str(parse_expr("1 + 2*x", evaluate=False)) == "2*x + 1"
assert math_verify.parse("3 + 4", extraction_config=[ExprExtractionConfig()], parsing_timeout=None)
for run in (sympy.sympify, parse_expr, lambda s: parse_expr(s, evaluate=False), x.equals, sympy.Number,
            lambda s: math_verify.parse("\\\\boxed{{" + s + "}}", parsing_timeout=None)):
    try:
        run(payload)
    except Exception:
        pass
print("done")
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300, env=_env()
    )
    assert out.returncode == 0 and "done" in out.stdout, out.stderr[-2000:]
    assert_nothing_ran(markers)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


# ----------------------------------------------------------------------------- 3. the graders


@pytest.mark.parametrize("mode", MODES)
def test_payload_answers_get_a_verdict_and_run_nothing(tmp_path, mode):
    markers = tmp_path / "markers"
    texts = payloads(markers)
    responses = [f"So the answer is \\boxed{{{t}}}." for t in texts]
    for response in responses:  # one by one: each payload in its own comparison
        result = grade("1", response, mode=mode, timeout_s=30)
        assert result.status in STATUSES and result.correct is False
    for gold in texts:  # a benchmark file's gold is no more trusted than a response
        result = grade(gold, "\\boxed{1}", mode=mode, timeout_s=30)
        assert result.status in STATUSES and result.correct is False
    batch = grade_batch(["\\frac{1}{2}"] * len(responses), responses, mode=mode, timeout_s=60)
    assert len(batch.results) == len(responses) and not any(r.correct for r in batch.results)
    for t in texts:
        assert answers_equivalent(t, "x + 1", mode=mode, timeout_s=30) in (True, False)
    vote = majority_vote(responses + responses[:1] + ["\\boxed{x + 1}"], mode=mode, timeout_s=60)
    assert 0.0 <= vote.pass_rate <= 1.0 and len(vote.agrees) == len(responses) + 2
    vote = majority_vote(answers=texts + ["2", "2"], mode=mode, timeout_s=60)
    assert 0.0 <= vote.pass_rate <= 1.0
    assert_nothing_ran(markers)


@pytest.mark.parametrize("mode", MODES)
def test_grading_cli_runs_no_payload(tmp_path, mode):
    markers = tmp_path / "markers"
    texts = payloads(markers)
    verify = "".join(json.dumps({"gold": "1", "response": f"\\boxed{{{t}}}"}) + "\n" for t in texts)
    verify += "".join(json.dumps({"gold": t, "response": "\\boxed{1}"}) + "\n" for t in texts)
    vote = json.dumps({"responses": [f"\\boxed{{{t}}}" for t in texts] * 2}) + "\n"
    for command, stdin, lines in (("verify", verify, 2 * len(texts)), ("vote", vote, 1)):
        out = subprocess.run(
            [sys.executable, "-m", "cpmobius.grading", "--mode", mode, command],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=_env(),
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert len(out.stdout.splitlines()) == lines
    verdicts = [json.loads(line) for line in out.stdout.splitlines()]
    assert all("pass_rate" in v for v in verdicts)
    assert_nothing_ran(markers)


@pytest.mark.parametrize("grader", ["cpmobius", "released"])
def test_rescoring_a_completions_file_runs_no_payload(tmp_path, grader):
    """The evaluation CLI's default score-only path (both graders: the disagreement report is on)
    on a completions file of payload responses and a benchmark file with a payload gold."""
    markers = tmp_path / "markers"
    texts = payloads(markers)
    data = tmp_path / "data"
    golds = ["204", texts[0], "\\frac{1}{2}"]
    write_jsonl(
        data / "aime24" / "aime24.jsonl",
        [
            {"id": f"aime24-{i}", "problem": f"Problem {i}?", "answer": g, "alt_answers": []}
            for i, g in enumerate(golds)
        ],
    )
    records = []
    for i in range(len(golds)):
        responses = [f"Reasoning. So the answer is $\\boxed{{{t}}}$." for t in texts] + ["\\boxed{204}"]
        records += [
            {"benchmark": "aime24", "problem_id": f"aime24-{i}", "sample": j, "response": r}
            for j, r in enumerate(responses)
        ]
    completions = write_jsonl(tmp_path / "run" / "completions.jsonl", records)
    code = eval_main(
        ["--completions", str(completions), "--data-dir", str(data), "--bootstrap", "10", "--grader", grader]
    )
    assert code == 0
    result = json.loads((completions.parent / "results.json").read_text())
    problems = {p["problem_id"]: p for p in result["problems"]["aime24"]}
    assert len(problems) == 3 and all(len(p["statuses"]) == len(texts) + 1 for p in problems.values())
    assert problems["aime24-0"]["correct"][-1] is True  # the one right answer is still right
    assert (completions.parent / "grader_disagreements.md").exists()  # the other grader ran too
    assert_nothing_ran(markers)


# ----------------------------------------------------------------------------- the toy world


def test_toy_arithmetic_is_read_from_the_syntax_tree():
    from cpmobius.toy.world import integer_arithmetic, make_problem, solve

    assert integer_arithmetic("((7 * 3)) - 2 * (4 - 9)") == 31
    assert integer_arithmetic("+".join(["1"] * 2000)) == 2000  # as deep as Python parses: no recursion of ours
    for text in ("(3)(4)", "2 ** 3", "-1", "x", "__import__('os').system('true')", "(1).__class__", "3 / 4"):
        with pytest.raises(ValueError):
            integer_arithmetic(text)
    with pytest.raises(SyntaxError):
        integer_arithmetic("(3 +) 4")
    assert solve("What is (3)(4)?") is None and solve("What is 999999 * 999999?") == str(999999 * 999999)
    import random

    rng = random.Random(0)
    for _ in range(200):
        problem = make_problem(rng)
        assert solve(problem.text) == problem.answer
