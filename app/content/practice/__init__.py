"""Practice engine: variants and grading. Pure functions: no HTTP, no database.

Three question kinds (see app/content/schema/questions.py):
- single_choice: `grade(q, None, "A")` returns that option's own feedback.
- free_response: `grade(q, None, text)` accepts any non-empty text as `answered` and hands back the
  reference answer; the app stores the learner's text before it shows the reference.
- numeric: fixed (`answer:`) or parameterized (`generator:` + `params:` ranges). `make_variant(q, seed)`
  draws the parameters deterministically from the seed and renders the prompt; `grade(q, variant, raw)`
  parses the learner's number and unit and compares within the tolerance.

The package is split along its seams: `generators` (per-learner variants, drawn from the problem
families in `numerics` and `planning`), `answers` (reading a number and its unit), `grading` (comparing
with the key, one step of a multi-step problem at a time).
"""

from .answers import parse_number
from .family import Generator
from .generators import GENERATORS, PracticeError, Variant, check_numeric, fill, make_variant
from .grading import Feedback, Status, grade, grade_step, step_question

__all__ = [
    "GENERATORS",
    "Feedback",
    "Generator",
    "PracticeError",
    "Status",
    "Variant",
    "check_numeric",
    "fill",
    "grade",
    "grade_step",
    "step_question",
    "make_variant",
    "parse_number",
]
