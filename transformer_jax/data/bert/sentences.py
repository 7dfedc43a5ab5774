"""Sentences of a document, for BERT's segment pairs: prose split at sentence ends, code kept whole.

Paragraphs are blocks between blank lines. A paragraph that looks like code (a line starting
with `>>>` or `...`, or indented by four spaces or a tab) is one "sentence" as written. Prose
lines are joined and split after `.`, `!` or `?` (and any closing quote or bracket) followed by
whitespace and an upper-case letter, a digit, a quote or a bracket, except after a known
abbreviation ("e.g.", "i.e.", "Mr.", ...) or a single-letter initial. A dot inside a word
(`os.path.join`, `3.14`) never ends a sentence: a space must follow it.
"""

from __future__ import annotations

import re

ABBREVIATIONS = frozenset(
    "e.g. i.e. etc. vs. cf. al. approx. ca. resp. incl. esp. no. nos. fig. figs. eq. sec. "
    "ch. vol. ed. eds. p. pp. mr. mrs. ms. dr. prof. st. jr. sr. inc. ltd. co. corp. "
    "jan. feb. mar. apr. jun. jul. aug. sep. sept. oct. nov. dec.".split()
)
_PARAGRAPHS = re.compile(r"\n[ \t]*\n")
_END = re.compile(r"""[.!?]['")\]]*\s+(?=["'(\[]?[A-Z0-9])""")
_CODE_LINE = re.compile(r"^(>>>|\.\.\.|    |\t)")


def looks_like_code(paragraph: str) -> bool:
    """True when any line is a doctest prompt or indented: keep the paragraph whole."""
    return any(_CODE_LINE.match(line) for line in paragraph.split("\n"))


def _ends_sentence(text: str, end: int) -> bool:
    """Whether the punctuation run ending at `end` closes a sentence (not an abbreviation)."""
    word = text[:end].rsplit(None, 1)[-1].rstrip("'\")]").lower()
    if word in ABBREVIATIONS:
        return False
    return not re.fullmatch(r"[a-z]\.", word)  # an initial: "J. Smith"


def split_sentences(document: str) -> list[str]:
    """The document's sentences in order; none empty, none spanning two paragraphs."""
    sentences = []
    for paragraph in _PARAGRAPHS.split(document.replace("\r\n", "\n")):
        paragraph = paragraph.strip("\n")
        if not paragraph.strip():
            continue
        if looks_like_code(paragraph):
            sentences.append(paragraph.rstrip())
            continue
        prose = " ".join(line.strip() for line in paragraph.split("\n") if line.strip())
        start = 0
        for match in _END.finditer(prose):
            punctuation_end = match.start() + len(match.group().rstrip())
            if _ends_sentence(prose, punctuation_end):
                sentences.append(prose[start:punctuation_end])
                start = match.end()
        if prose[start:].strip():
            sentences.append(prose[start:].strip())
    return sentences
