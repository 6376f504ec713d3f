"""SymPy's string parser without Python's `eval` (stage: grading).

sympy's `parse_expr` (and `sympify` on a string, which calls it) turns the text into Python code
and runs it with `eval`: `parse_expr` of the text `__import__('os').system('...')` runs that command. Answers
come from a model under RL, from completions files and from benchmark files, none of them trusted,
so no such text may reach `eval`.

`parse_math_expression(s)` here gives what sympy's `parse_expr` gives on `s` for mathematical
text, built the same way (sympy's own tokenizer and transformations write the same code), except
that the code is never run: `_Interpreter` walks its syntax tree and builds the sympy objects itself,
from a whitelist:

* numbers, `None`, `...`; strings only as the literal argument of `Symbol`, `Function`, `Integer`,
  `Float` or `Rational` (what sympy's transformations write for names and numbers); tuples, lists,
  sets and dicts of these;
* names bound to sympy objects (`pi`, `E`, `oo`, ...), sympy classes (`sin`, `Add`, `Symbol`,
  `Integral`, an undefined function `f`, ...) and the functions of `SAFE_FUNCTIONS` (`sqrt`, ...);
* calls of those classes and functions (keyword argument: `evaluate` only); the arithmetic,
  bitwise, comparison and boolean operators as Python applies them to sympy objects.

Any other name (`N`, `__import__`, `open`, `eval`, `S`, `sympify`, `lambdify`) stands for an inert
placeholder (`_Opaque`: no arithmetic, as with the function itself, and never callable). Calling it,
attribute access, subscripts, lambda, comprehensions, f-strings and other strings raise
`UnsafeExpression`, a `ValueError`, where sympy would have run them; a construct that fails in Python
anyway (calling an `Add`, a missing attribute) raises Python's own error.

`install()` puts the same interpreter in place of `eval` inside sympy's parser for the whole process,
so a string that reaches `parse_expr` by another road (sympy's `sympify` or `Number` of a string,
`Expr.equals(str)`; math-verify's plain-expression parse; latex2sympy's number tokens) is never run
as code either. The grading worker processes call it at start-up.
"""

from __future__ import annotations

import ast
import builtins
import operator
import types
from functools import lru_cache
from typing import Any, Callable, Mapping

SAFE_FUNCTIONS = ("sqrt", "cbrt", "root", "real_root", "abs", "pow", "round")
"""Plain functions (not sympy classes) a parsed expression may call: sympy's roots, and the builtins
`abs`, `pow`, `round` (which apply sympy's own `__abs__`, `__pow__`, `__round__`)."""

STRING_CONSTRUCTORS = ("Symbol", "Function", "Integer", "Float", "Rational")
"""The only callables that take a string literal: sympy's transformations write `Symbol('x')`,
`Function('f')`, `Float('1.5')`, and none of them evaluates the string as code."""


class UnsafeExpression(ValueError):
    """The text would need more than mathematics to parse (a name, attribute or construct off the whitelist)."""


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
    ast.Not: operator.not_,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_NUMBERS = (bool, int, float, complex)


@lru_cache(maxsize=1)
def _sympy_names() -> tuple[dict[str, Any], frozenset[int], frozenset[int]]:
    """parse_expr's default global names (`from sympy import *`, the builtin functions, max/min as
    Max/Min), and the ids of the safe plain functions and of the string constructors."""
    import sympy

    names: dict[str, Any] = {name: getattr(sympy, name) for name in sympy.__all__}
    for name, obj in vars(builtins).items():
        if isinstance(obj, types.BuiltinFunctionType):
            names[name] = obj
    names["max"], names["min"] = sympy.Max, sympy.Min
    safe = frozenset(id(names[name]) for name in SAFE_FUNCTIONS)
    constructors = frozenset(id(getattr(sympy, name)) for name in STRING_CONSTRUCTORS)
    return names, safe, constructors


def default_global_dict() -> dict[str, Any]:
    """A fresh copy of parse_expr's default global names (the interpreter still admits only safe ones)."""
    return dict(_sympy_names()[0])


def _allowed_callable(obj: Any) -> bool:
    import sympy

    if isinstance(obj, type):
        return issubclass(obj, sympy.Basic)  # sympy classes: sin, Add, Symbol, an undefined function f
    return id(obj) in _sympy_names()[1]


def _allowed_value(obj: Any) -> bool:
    import sympy

    return isinstance(obj, (sympy.Basic, *_NUMBERS)) or obj is None or _allowed_callable(obj)


class _Opaque:
    """Stands for a name parse_expr would bind to a non-mathematical object (`N`, `eval`, `open`, `S`):
    like that object it is equal to itself, prints as it does and supports no arithmetic (a TypeError,
    as Python gives), but it holds no reference to the object and can never be called."""

    __slots__ = ("name", "text")
    _interned: dict[str, _Opaque] = {}

    def __init__(self, name: str, text: str) -> None:
        self.name, self.text = name, text

    @classmethod
    def of(cls, name: str, obj: Any) -> _Opaque:
        key = f"{name}\0{id(obj)}"
        if key not in cls._interned:
            cls._interned[key] = cls(name, repr(obj))
        return cls._interned[key]

    def __repr__(self) -> str:
        return self.text


class _Interpreter:
    """Evaluates the expression tree of sympy-generated code over the whitelist (module docstring)."""

    def __init__(self, local_dict: Mapping[str, Any], global_dict: Mapping[str, Any]):
        self.local_dict, self.global_dict = local_dict, global_dict

    def run(self, tree: ast.AST) -> Any:
        if not isinstance(tree, ast.Expression):
            raise UnsafeExpression(f"not an expression: {type(tree).__name__}")
        return self.value(tree.body)

    def value(self, node: ast.AST) -> Any:
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise UnsafeExpression(f"{type(node).__name__} is not allowed in a mathematical expression")
        return method(node)

    def _Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, _NUMBERS) or node.value is None or node.value is Ellipsis:
            return node.value
        raise UnsafeExpression(f"a {type(node.value).__name__} literal is not allowed here")

    def _Name(self, node: ast.Name) -> Any:
        if node.id in self.local_dict:
            obj = self.local_dict[node.id]
        elif node.id in self.global_dict:
            obj = self.global_dict[node.id]
        else:
            raise NameError(f"name {node.id!r} is not defined")
        return obj if _allowed_value(obj) else _Opaque.of(node.id, obj)

    def _Attribute(self, node: ast.Attribute) -> Any:
        obj = self.value(node.value)
        if not hasattr(obj, node.attr):  # Python's own error ("np.arcsin(..)": a Symbol np has no arcsin)
            raise AttributeError(f"{type(obj).__name__!r} object has no attribute {node.attr!r}")
        raise UnsafeExpression("attribute access is not allowed in a mathematical expression")

    def _Call(self, node: ast.Call) -> Any:
        func = self.value(node.func)
        if isinstance(func, _Opaque):
            raise UnsafeExpression(f"{func.name!r} may not be called in a mathematical expression")
        takes_text = id(func) in _sympy_names()[2]
        args = []
        for arg in node.args:
            if takes_text and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                args.append(arg.value)
            else:
                args.append(self.value(arg))
        kwargs = {}
        for keyword in node.keywords:
            if keyword.arg != "evaluate" or not (
                isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, bool)
            ):
                raise UnsafeExpression("the only keyword argument allowed is evaluate=True|False")
            kwargs["evaluate"] = keyword.value.value
        if not _allowed_callable(func):
            if not callable(func):  # Python's own error ("(a+5)(b+2)": an Add is not callable)
                raise TypeError(f"{type(func).__name__!r} object is not callable")
            raise UnsafeExpression(f"{func!r:.60} may not be called in a mathematical expression")
        return func(*args, **kwargs)

    def _BinOp(self, node: ast.BinOp) -> Any:
        op = _BINARY.get(type(node.op))
        if op is None:
            raise UnsafeExpression(f"the operator {type(node.op).__name__} is not allowed")
        left = self.value(node.left)
        return op(left, self.value(node.right))

    def _UnaryOp(self, node: ast.UnaryOp) -> Any:
        return _UNARY[type(node.op)](self.value(node.operand))

    def _Compare(self, node: ast.Compare) -> Any:
        left = self.value(node.left)
        result: Any = True
        for op_node, right_node in zip(node.ops, node.comparators):
            op = _COMPARE.get(type(op_node))
            if op is None:
                raise UnsafeExpression(f"the comparison {type(op_node).__name__} is not allowed")
            right = self.value(right_node)
            result = op(left, right)
            if len(node.ops) > 1 and not result:  # Python's chained comparison (a sympy relation: TypeError)
                return result
            left = right
        return result

    def _BoolOp(self, node: ast.BoolOp) -> Any:
        result: Any = None
        for value_node in node.values:
            result = self.value(value_node)
            if isinstance(node.op, ast.And) != bool(result):
                return result
        return result

    def _Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.value(e) for e in node.elts)

    def _List(self, node: ast.List) -> list:
        return [self.value(e) for e in node.elts]

    def _Set(self, node: ast.Set) -> set:
        return {self.value(e) for e in node.elts}

    def _Dict(self, node: ast.Dict) -> dict:
        if any(key is None for key in node.keys):
            raise UnsafeExpression("** unpacking is not allowed in a mathematical expression")
        return {self.value(k): self.value(v) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]


def interpret(code: str | ast.AST, local_dict: Mapping[str, Any], global_dict: Mapping[str, Any]) -> Any:
    """The value of sympy-generated code (a string, or the tree of `evaluateFalse`), over the whitelist.

    Raises:
        UnsafeExpression: a construct, name or literal off the whitelist.
        SyntaxError, TypeError, ...: as `eval` of the same code would (the caller catches them).
    """
    if isinstance(code, str):
        code = ast.parse(code.lstrip(" \t"), mode="eval")  # Python's eval also drops leading blanks
    return _Interpreter(local_dict, global_dict).run(code)


def parse_math_expression(
    s: str,
    local_dict: dict[str, Any] | None = None,
    transformations: Any = None,
    global_dict: dict[str, Any] | None = None,
    evaluate: bool = True,
    *,
    convert_xor: bool = False,
) -> Any:
    """`sympy.parsing.sympy_parser.parse_expr` without `eval` (module docstring).

    Args:
        s: the text.
        local_dict, global_dict: as sympy's (default: sympy's names); only whitelisted values are used.
        transformations: as sympy's (default: its `standard_transformations`).
        evaluate: as sympy's (False: operators become unevaluated `Add`, `Mul`, ...).
        convert_xor: append sympy's `convert_xor` (`^` is a power), as `sympify` does.

    Raises:
        UnsafeExpression, or what sympy's parse_expr raises for text it cannot parse.
    """
    from sympy.parsing import sympy_parser as sp

    local_dict = {} if local_dict is None else local_dict
    global_dict = default_global_dict() if global_dict is None else global_dict
    chain = tuple(sp.standard_transformations if transformations is None else transformations)
    if convert_xor:
        chain += (sp.convert_xor,)
    code = sp.stringify_expr(s, local_dict, global_dict, chain)
    tree = sp.evaluateFalse(code) if not evaluate else code
    return interpret(tree, local_dict, global_dict)


def to_sympy(s: str) -> Any:
    """What `sympy.sympify` gives for a string s (standard transformations and `^` as a power), without `eval`.

    Raises:
        sympy.SympifyError: unparsable text (as sympify); UnsafeExpression: text off the whitelist.
    """
    from sympy import SympifyError
    from sympy.parsing.sympy_parser import TokenError

    try:
        return parse_math_expression(s.replace("\n", ""), convert_xor=True)
    except (TokenError, SyntaxError) as exc:
        raise SympifyError(f"could not parse {s!r}", exc) from None


def _keep_tree(source: Any, filename: str, mode: str, *args: Any, **kwargs: Any) -> Any:
    """Stands for `compile` inside sympy's parser: the `evaluateFalse` tree goes to the interpreter as is."""
    if isinstance(source, ast.Expression):
        return source
    raise UnsafeExpression("sympy's parser asked to compile something other than an expression tree")


def _eval_expr(code: Any, local_dict: dict[str, Any], global_dict: dict[str, Any]) -> Any:
    """Stands for sympy's `eval_expr` (which runs `eval`): the whitelist interpreter."""
    return interpret(code, local_dict, global_dict)


def install() -> None:
    """Replace `eval` in sympy's parser by the interpreter, for this whole process (idempotent).

    Every `parse_expr` of sympy, however it was imported, looks `eval_expr` and `compile` up in its
    module at call time, so `sympify`, `Number` and `Expr.equals` of a string, math-verify's and
    latex2sympy's calls all go through `interpret`.
    """
    from sympy.parsing import sympy_parser as sp

    sp.eval_expr = _eval_expr
    sp.compile = _keep_tree  # type: ignore[attr-defined]  # shadows the builtin for parse_expr with evaluate=False


def installed() -> bool:
    """Whether `install()` is in force in this process."""
    import sys

    sp = sys.modules.get("sympy.parsing.sympy_parser")
    return sp is not None and vars(sp).get("eval_expr") is _eval_expr
