"""Reading a learner's numeric answer: the number (thousands separators, decimal commas, exponents) and
its unit, converted to the question's unit. Errors are ValueErrors whose message is shown to the learner.

A plain calculation of numbers is read too ("448/400", "2 × 8 GiB", "(70e9 * 2) / 8"), because that is how
people write a ratio they worked out: it is parsed with Python's `ast` into numbers and + − × ÷ and small
powers only, and evaluated by walking that tree (never `eval`).
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable

from labs.api import number

# ---------------------------------------------------------------- parsing answers

_UNITS: dict[str, tuple[str, float]] = {
    "d": ("time", 86400.0),
    "day": ("time", 86400.0),
    "days": ("time", 86400.0),
    "h": ("time", 3600.0),
    "hour": ("time", 3600.0),
    "hours": ("time", 3600.0),
    "min": ("time", 60.0),
    "s": ("time", 1.0),
    "sec": ("time", 1.0),
    "ms": ("time", 1e-3),
    "us": ("time", 1e-6),
    "µs": ("time", 1e-6),
    "μs": ("time", 1e-6),
    "ns": ("time", 1e-9),
    "b": ("bytes", 1.0),
    "bytes": ("bytes", 1.0),
    "kb": ("bytes", 1e3),
    "mb": ("bytes", 1e6),
    "gb": ("bytes", 1e9),
    "tb": ("bytes", 1e12),
    "kib": ("bytes", 2.0**10),
    "mib": ("bytes", 2.0**20),
    "gib": ("bytes", 2.0**30),
    "tib": ("bytes", 2.0**40),
    "%": ("ratio", 1.0),
    "percent": ("ratio", 1.0),
    "x": ("factor", 1.0),
    "×": ("factor", 1.0),
}
# A power of ten as labs/words.py writes it in prompts and results ("6.07 × 10⁻⁷", "1 × 10¹⁸", "10⁹"), or with a
# raised dot ("1.2·10²⁰", "6.07·10^-7"): read as e-notation, so a learner may type back what a prompt shows.
_SUPERSCRIPT_DIGITS = str.maketrans("⁻⁺⁰¹²³⁴⁵⁶⁷⁸⁹", "-+0123456789")
# The mantissa starts where a number starts (the look-behind) and its loops are possessive: on a 20,000-digit answer
# the old pattern retried from every digit and backtracked through the rest, quadratic (112 s), holding the GIL.
_MANTISSA = r"(?<![\d,.])(\d++(?:,\d++)*+(?:\.\d*+)?+|\.\d++)"
_POWER_OF_TEN = re.compile(
    rf"(?:{_MANTISSA}\s*+[×x*·]\s*+|(?<![\d.]))10([⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)"
    rf"|{_MANTISSA}\s*+·\s*+10\s*+\^\s*+([-+]?\d+)"
)


def _e_notation(m: re.Match) -> str:
    if m.group(2) is not None:
        return f"{m.group(1) or '1'}e{m.group(2).translate(_SUPERSCRIPT_DIGITS)}"
    return f"{m.group(3)}e{m.group(4)}"


_NUMBER = re.compile(r"^([+-]?(?:\d+(?:[.,]\d*)?|[.,]\d+)(?:e[+-]?\d+)?)\s*(.*)$", re.IGNORECASE)
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d*)?$")


# ---------------------------------------------------------------- a plain calculation of numbers

_OPERATOR = re.compile(r"[\d.)]\s*(?:\*\*|[-+*/×÷^])\s*[-+\d.(]|^\s*\(")  # an operator between two numbers
_EXPR_UNIT = re.compile(r"^(.*?[\d.)])\s*([A-Za-zµμ%]+)$")  # a unit after the calculation: "448/400 ms"
_EXPR_CHARS = re.compile(r"^[\d\s.,eE+\-*/()]+$")
_NUMBER_TOKEN = re.compile(r"\d[\d,]*(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
MAX_EXPRESSION = 80  # characters: a worked ratio, not a program
MAX_POWER = 64  # 2**30 and 10**-3 are units of thought; 9**9**9 is not an answer


class _NotReal(ArithmeticError):
    """A negative number to a fractional power: Python answers with a complex number, which no question wants."""


def _plain_number(token: str) -> str:
    """One number of a calculation: '16,384' is sixteen thousand, '0,5' a decimal comma."""
    if _THOUSANDS.match(token.split("e")[0].split("E")[0]):
        return token.replace(",", "")
    return token.replace(",", ".")


def _walk(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _walk(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _walk(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _walk(node.left), _walk(node.right)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ZeroDivisionError
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        base, exponent = _walk(node.left), _walk(node.right)
        if abs(exponent) > MAX_POWER or abs(base) > 1e6:
            raise OverflowError
        if base < 0 and not exponent.is_integer():
            raise _NotReal
        return base**exponent
    raise TypeError(type(node).__name__)


def evaluate(expression: str) -> float:
    """The value of a plain calculation of numbers (+ - * / ^ and parentheses); ValueError otherwise."""
    text = expression.replace("×", "*").replace("÷", "/").replace("^", "**")
    shown = expression.strip()
    if len(text) > MAX_EXPRESSION or not _EXPR_CHARS.match(text.replace("**", "*")):
        raise ValueError(
            f"“{shown}” is not a number or a plain calculation. Write digits, e.g. 14 or 1.87, "
            "or numbers with + − × ÷, e.g. 448/400."
        )
    text = _NUMBER_TOKEN.sub(lambda m: _plain_number(m.group(0)), text)
    try:
        value = _walk(ast.parse(text, mode="eval"))
    except ZeroDivisionError:
        raise ValueError(f"“{shown}” divides by zero.") from None
    except _NotReal:
        raise ValueError(
            f"“{shown}” has no real value: a negative number to a fractional power. "
            "Raise a positive number, e.g. 8^0.5, or use a whole power, e.g. (-8)^3."
        ) from None
    except (OverflowError, ValueError):
        raise ValueError(f"“{shown}” is too large to be an answer.") from None
    except (SyntaxError, TypeError):
        raise ValueError(
            f"“{shown}” is not a calculation I can read: use numbers, + − × ÷ and parentheses, e.g. (70 × 2) / 8."
        ) from None
    if not math.isfinite(value):
        raise ValueError(f"“{shown}” is too large to be an answer.")
    return value


def parse_number(raw: str) -> tuple[float, str]:
    """'1,234.5 ms' -> (1234.5, 'ms'); '448/400' -> (1.12, ''). ValueError with a learner-facing message when
    it is neither a number nor a plain calculation of numbers."""
    text = (raw or "").strip().replace("−", "-").replace("\u00a0", " ").replace("_", "")
    text = re.sub(r"(?<=\d) (?=\d{3}\b)", "", text)  # "16 384" -> "16384"
    text = _POWER_OF_TEN.sub(_e_notation, text)  # "6.07 × 10⁻⁷" -> "6.07e-7"
    if not text:
        raise ValueError("Type a number first.")
    if _OPERATOR.search(text):
        m = _EXPR_UNIT.match(text)
        expression, unit = (m.group(1), m.group(2)) if m and not re.search(r"[eE]$", m.group(1)) else (text, "")
        return evaluate(expression), unit
    head = re.match(r"^[+-]?[\d.,]+(?:e[+-]?\d+)?", text, re.IGNORECASE)
    if head and _THOUSANDS.match(head.group(0).split("e")[0].split("E")[0]):
        text = text.replace(",", "", head.group(0).count(","))
    m = _NUMBER.match(text)
    if not m:
        raise ValueError(
            f"“{raw.strip()}” is not a number. Write digits, e.g. 14 or 1.87 or 2.5e3, or a calculation such as 448/400."
        )
    number = m.group(1).replace(",", ".")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"“{raw.strip()}” is not a number.") from None
    if not math.isfinite(value):
        raise ValueError("The answer must be a finite number.")
    return value, m.group(2).strip()


def convert(value: float, unit: str, target: str) -> float:
    """Express value given in `unit` in the question's `target` unit; ValueError when they do not match."""
    if not unit or unit.lower() == target.lower():
        return value
    src, dst = _UNITS.get(unit.lower()), _UNITS.get(target.lower())
    if not target:
        raise ValueError(f"This answer has no unit; drop “{unit}”.")
    if src is None or dst is None or src[0] != dst[0]:
        raise ValueError(f"“{unit}” cannot be converted to {target}; answer in {target}.")
    return value * src[1] / dst[1]


def gradable(x: float, accepts: Callable[[float, float], bool] | None = None) -> str:
    """`x` as number() writes it, with as many significant digits as it takes for the written value to read back
    as `x` under `accepts(written, x)` (a question's tolerance): 1500.625 stays "1,500.625" where an exact
    answer is asked, not the "1,501" four digits would give, which the grader would refuse."""
    if accepts is None:
        return number(x)
    for digits in range(4, 18):
        text = number(x, digits)
        try:
            if accepts(parse_number(text)[0], x):
                return text
        except ValueError:  # a power of ten written for a very small or large x: keep number()'s form
            break
    return number(x)


def with_unit(x: float, unit: str, accepts: Callable[[float, float], bool] | None = None) -> str:
    """An answer as the prompt would show it ("6.07 × 10⁻⁷ s", "40%"), which parse_number reads back; with
    `accepts` (a tolerance's test) in as many digits as the tolerance needs to accept it back."""
    text = gradable(x, accepts)
    if not unit:
        return text
    sep = "" if unit in ("%", "x", "×") else " "
    return f"{text}{sep}{unit}"
