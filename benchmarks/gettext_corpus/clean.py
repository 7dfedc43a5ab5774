"""From a catalog entry to a clean English-Spanish pair, or the reason it is left out.

What happens to the text of both sides, in this order, and why:

1. Markup: a pair with an HTML/XML tag on either side (`<b>`, `<a href=...>`, `<regex_name>`)
   is left out. Tags are not language; kept, the model would have to learn to copy attributes
   and URLs, and stripped, the remaining words often read wrongly without them.
2. Placeholders (`%(name)s`, `%s`, `%1$s`, `%1`, `%PRODUCTNAME`, `%x%`, `%{x}`, `{0}`, `{name}`,
   `{/name}`, `{{ x }}`, `${x}`, `$(ARG1)`, `$x$`, `$x`, `$1`, `#PAGENUMBER#`) are found on both
   sides. When the two sides do not hold the same placeholders (as a multiset, white space inside
   them ignored) the pair is left out: the translator dropped, added or changed a slot, so the pair
   is not a faithful translation and would teach the model to lose or invent slots. Otherwise each
   is replaced by `{}` (MASK): one token the model learns to copy, instead of identifiers split
   into word pieces. `%%` becomes `%`.
3. Accelerator marks (the letter a keyboard shortcut underlines) are removed, in the styles the
   package uses (`~` LibreOffice, `_` GTK and LibreOffice dialogs, `&` Qt): a mark is the
   character right before a letter, digit or `{}`, removed when a side has exactly one (two or
   more are identifiers such as `gramps_id`, left as written); a doubled mark is the literal
   character. An `&` that starts an HTML entity is no mark.
4. HTML entities (`&amp;`, `&nbsp;`, `&#8230;`) are decoded.
5. Unicode NFC; every run of white space (line breaks and no-break spaces included) becomes one
   space, none at either end. A pair with another control character is left out.
6. A pair is left out when a side is empty, the English has no letter, or both sides are equal
   ignoring case (an untranslated term such as "PDF").

Before all of this, an English side that is a snake_case identifier ("label_save", a message id
with no `#. Default:` text to stand for it) is left out: it is no English.
"""

from __future__ import annotations

import collections
import html
import re
import unicodedata

MASK = "{}"
ACCELERATORS = ("~", "_", "&")  # The styles a package may name.

_TAG = re.compile(r"</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>")
_PLACEHOLDER = re.compile(
    "|".join([
        r"%%",  # An escaped percent sign, not a placeholder.
        r"%\([^()\s]+\)[-#0+]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]",  # %(name)s
        r"%\d+\$[-#0+]*\d*(?:\.\d+)?[a-zA-Z]",  # %1$s
        r"%[A-Z][A-Z0-9_]*[A-Z0-9]",  # LibreOffice's %PRODUCTNAME, %FILE_NAME
        r"%[A-Za-z_]\w+%",  # %num% (before %s, which would take "%s" of "%size%")
        r"%\{[A-Za-z0-9_.]+\}",  # %{name}
        r"%[-#0+]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGcrsa]",  # %s
        r"%\d+",  # Qt and LibreOffice: %1, %2
        r"\$\{[^{}]*\}",  # ${name}
        r"\$\([A-Za-z0-9_]+\)",  # LibreOffice: $(ARG1)
        r"\$[A-Za-z_]\w*\$",  # LibreOffice: $name$ (before $name)
        r"\$\d(?!\d)",  # LibreOffice: $1 (not $100)
        r"\$[A-Za-z_]\w*",  # string.Template: $name
        r"#[A-Z][A-Z0-9_]*#",  # LibreOffice: #PAGENUMBER#
        r"\{\{[^{}]*\}\}",  # {{ name }}
        r"\{[A-Za-z0-9_]*(?:\[[^\]{}]*\]|\.[A-Za-z_]\w*)*(?:![rsa])?(?::[^{}]*)?\}",  # {0} {name}
        r"\{/[A-Za-z_]\w*\}",  # The end of a {link}...{/link} span.
    ])
)  # fmt: skip
_ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#[xX][0-9A-Fa-f]+);")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # After white space is normalised.
_LETTER = re.compile(r"[^\W\d_]")
_IDENTIFIER = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")


def placeholders(text: str) -> list[str]:
    """The placeholders of `text` in order (`%%` is none), white space inside them removed."""
    return ["".join(m.split()) for m in _PLACEHOLDER.findall(text) if m != "%%"]


def mask(text: str) -> str:
    """`text` with each placeholder replaced by MASK and `%%` by `%`."""
    return _PLACEHOLDER.sub(lambda m: "%" if m.group() == "%%" else MASK, text)


def remove_accelerators(text: str, marks: str) -> str:
    """`text` without its accelerator mark, for each mark character in `marks`.

    A mark is the character right before a letter, digit or MASK; it is removed only where the
    text holds exactly one (more are identifiers, kept). A doubled mark stands for the character.
    """
    for mark in marks:
        escaped = re.escape(mark)
        # Tokens: a doubled mark, an entity (for &), a mark before a letter or digit.
        token = re.compile(
            f"{escaped}{escaped}" + (f"|{_ENTITY.pattern}" if mark == "&" else "")
            + rf"|{escaped}(?=[^\W_]|\{{\}})"
        )  # fmt: skip
        singles = [m for m in token.finditer(text) if len(m.group()) == 1]
        if len(singles) > 1:
            continue

        def replace(match: re.Match, mark: str = mark) -> str:
            found = match.group()
            if found == mark * 2:
                return mark
            return found if len(found) > 1 else ""

        text = token.sub(replace, text)
    return text


def normalise(text: str) -> str:
    """NFC, white space runs as one space, no space at either end."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def clean_pair(english: str, spanish: str, accelerators: str = "") -> tuple[str, str] | str:
    """One catalog entry's English and (first-form) Spanish, cleaned as the module says.

    Args:
      english: the msgid.
      spanish: the msgstr (form 0 of a plural entry).
      accelerators: the package's accelerator mark characters, e.g. "~_" (none: "").

    Returns:
      The cleaned (english, spanish), or the reason the pair is left out: one of "identifier",
      "markup", "placeholders differ", "control character", "empty", "no letter", "equal".
    """
    if _IDENTIFIER.fullmatch(english):
        return "identifier"
    if _TAG.search(english) or _TAG.search(spanish):
        return "markup"
    if collections.Counter(placeholders(english)) != collections.Counter(placeholders(spanish)):
        return "placeholders differ"
    sides = []
    for text in (english, spanish):
        text = remove_accelerators(mask(text), accelerators)
        text = _ENTITY.sub(lambda m: html.unescape(m.group()), text)
        sides.append(normalise(text))
    english, spanish = sides
    if _CONTROL.search(english) or _CONTROL.search(spanish):
        return "control character"
    if not english or not spanish:
        return "empty"
    if not _LETTER.search(english.replace(MASK, "")):
        return "no letter"
    if english.casefold() == spanish.casefold():
        return "equal"
    return english, spanish


def leak_key(english: str) -> str:
    """What two English strings share when one would leak the other across splits: the
    words, ignoring case, punctuation, spacing and accelerator-free variants ("Save As...",
    "save as:" and "Save as" share "save as")."""
    words = re.findall(r"[^\W_]+", english.casefold().replace(MASK, " mask "))
    return " ".join(words)
