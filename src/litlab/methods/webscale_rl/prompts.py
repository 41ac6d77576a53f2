"""The four LLM stages' prompts, in our words after the official pipeline's templates (PretrainRL-pipeline,
``behavior_template/``): each asks for one JSON object with a ``thought`` field and the stage's labels."""

from __future__ import annotations

DOMAIN_LIST = (
    "Math",
    "Tech & Engineering",
    "Coding",
    "Social Science",
    "Natural Science",
    "Travel & Lifestyle",
    "Commerce & Economics",
    "Medicine & Health",
    "Education",
    "Other",
)

FILTER = """You will read a material taken from a web page, which may be messy or badly structured. Decide
whether question and answer pairs can be extracted from it. Keep it only if it is informative and
self-contained, has enough depth and clarity, and states at least one fact that a short, verifiable
answer can come from.

[Material]
{material}

Reply with one JSON object and nothing else:
{{"thought": "your reasoning", "qualified": "Y or N"}}"""

IDENTIFIER = """You will read a material taken from a web page. Assign it exactly one domain from this list:
{domains}. Then name up to 3 personas: the people who would most likely read this material and ask about it.

[Material]
{material}

Reply with one JSON object and nothing else:
{{"thought": "your reasoning", "domain": "one domain from the list", "personas": ["persona", ...]}}"""

GENERATOR = """You will read a material taken from a web page. Acting as the given persona, write one question
and its answer from the material.
- The question and the answer must come only from the material; add nothing that is not in it.
- The answer must be short and easy to verify.
- The question is asked without the material, so open it with a brief background that names what it is
  about. Never write "according to the material".
- The background must never state the answer: that is information leakage and is forbidden.

Examples of question and answer pairs written from other materials of this domain:
{examples}

[Material]
{material}

[Persona]
{persona}

Reply with one JSON object and nothing else:
{{"thought": "your reasoning", "question": "the question", "answer": "the answer"}}"""

CHECKER = """You are a data labeller. You will read a material and a question and answer pair written from it.
- has_context: Y if the question carries the background it needs to be answered without the material
  (a question that says "according to the material" has none), else N.
- answer_correctness: Y if the answer is correct according to the material, else N.
- info_leakage: Y if the question states the answer, so that it can be read off the question, else N.

[Material]
{material}

[Question]
{question}

[Answer]
{answer}

Reply with one JSON object and nothing else:
{{"thought": "your reasoning", "has_context": "Y or N", "answer_correctness": "Y or N",
 "info_leakage": "Y or N"}}"""
