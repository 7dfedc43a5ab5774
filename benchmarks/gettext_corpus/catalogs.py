"""gettext message catalogs read with the standard library: `.po` text files, compiled `.mo`
files, and the catalogs inside wheels (zip) and Debian packages (ar + data.tar.*).

A catalog is read into `Message`s exactly as written (no cleaning: see clean.py). Every
problem is a ValueError naming the file (and the line, for `.po`).
"""

from __future__ import annotations

import codecs
import dataclasses
import io
import re
import struct
import tarfile
import zipfile
from collections.abc import Iterator

_CHARSET = re.compile(rb"charset=([A-Za-z0-9_.:-]+)")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b",
            "f": "\f", "v": "\v", "'": "'", "?": "?"}  # fmt: skip
_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|.)", re.DOTALL)
_KEYWORD = re.compile(r"(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?)\s*(\".*)$")
_MO_MAGIC = 0x950412DE


@dataclasses.dataclass(frozen=True)
class Message:
    """One catalog entry.

    Attributes:
      msgid: the source (English) string; "" is the catalog's header.
      msgstr: the translations: one, or one per plural form (form 0 first).
      context: msgctxt, or None.
      plural: msgid_plural, or None.
      fuzzy: marked `#, fuzzy` (a guess awaiting review; `.mo` files never hold them).
      obsolete: commented out with `#~` (no longer used by the program).
      default: the source text of a Zope/Plone message id (`#. Default: "..."`), whose msgid
        is an identifier such as "label_save"; None elsewhere.
    """

    msgid: str
    msgstr: tuple[str, ...]
    context: str | None = None
    plural: str | None = None
    fuzzy: bool = False
    obsolete: bool = False
    default: str | None = None


def _charset(data: bytes, where: str) -> str:
    """The charset named by the catalog's header (Content-Type), UTF-8 if none."""
    match = _CHARSET.search(data[:8192])
    name = match.group(1).decode("ascii") if match else "utf-8"
    if name.upper() == "CHARSET":  # An untouched template header.
        return "utf-8"
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise ValueError(f"{where}: unknown charset {name!r} in the catalog's header.") from None


def _decode(data: bytes, charset: str, where: str) -> str:
    try:
        return data.decode(charset)
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{where}: not valid {charset} at byte {e.start}, the charset its header names."
        ) from None


def _unquote(text: str, where: str) -> str:
    """The value of a C-style quoted string such as `"a\\tb"`."""
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        raise ValueError(f"{where}: expected a quoted string, found {text!r}.")

    def replace(match: re.Match) -> str:
        code = match.group(1)
        if code[0] == "x":
            return chr(int(code[1:], 16))
        if code[0] in "01234567":
            return chr(int(code, 8))
        if code in _ESCAPES:
            return _ESCAPES[code]
        raise ValueError(f"{where}: unknown escape \\{code} in {text!r}.")

    return _ESCAPE.sub(replace, text[1:-1])


def read_po(data: bytes, where: str) -> list[Message]:
    """Parses the text of a `.po` file.

    Args:
      data: the file's bytes, in the charset its header names.
      where: how errors name the file.

    Returns:
      Its messages in file order, the header (msgid "") included, obsolete (`#~`) ones marked.

    Raises:
      ValueError: `where:line: problem` for anything that is not PO syntax.
    """
    text = _decode(data, _charset(data, where), where)
    messages: list[Message] = []
    fields: dict[str, str] = {}
    flags: set[str] = set()
    current: str | None = None  # The field that continuation lines extend.
    obsolete = False
    default: str | None = None

    def finish() -> None:
        nonlocal fields, flags, current, obsolete, default
        if "msgid" in fields:
            forms = sorted((int(k[7:-1]), v) for k, v in fields.items() if k.startswith("msgstr["))
            if [n for n, _ in forms] != list(range(len(forms))):
                raise ValueError(
                    f"{where}: msgid {fields['msgid']!r} has plural forms "
                    f"{[n for n, _ in forms]}, not 0, 1, ..."
                )
            msgstr = tuple(v for _, v in forms) if forms else (fields.get("msgstr", ""),)
            message = Message(
                msgid=fields["msgid"],
                msgstr=msgstr,
                context=fields.get("msgctxt"),
                plural=fields.get("msgid_plural"),
                fuzzy="fuzzy" in flags,
                obsolete=obsolete,
                default=default,
            )
            messages.append(message)
        elif fields:
            raise ValueError(f"{where}: an entry with {sorted(fields)} but no msgid.")
        fields, flags, current, obsolete, default = {}, set(), None, False, None

    for number, raw in enumerate(text.split("\n"), start=1):
        at = f"{where}:{number}"
        line = raw.strip()
        is_obsolete = line.startswith("#~")
        if is_obsolete:
            line = line[2:].strip()
            if line.startswith("|"):  # `#~|`: the previous msgid of an obsolete entry.
                continue
        elif line.startswith("#"):
            if any(k.startswith("msgstr") for k in fields):  # A comment starts the next entry.
                finish()
            if line.startswith("#,"):
                flags.update(f.strip() for f in line[2:].split(","))
            elif line.startswith("#. Default:"):
                try:
                    default = _unquote(line[len("#. Default:") :].strip(), f"{where}:{number}")
                except ValueError:  # A comment, not syntax: one we cannot read is no default.
                    default = None
            continue
        if not line:
            if is_obsolete:
                continue
            finish()
            continue
        if line.startswith('"'):
            if current is None:
                raise ValueError(f"{at}: a string continues no msgid or msgstr.")
            fields[current] += _unquote(line, at)
            continue
        match = _KEYWORD.match(line)
        if match is None:
            raise ValueError(f"{at}: expected msgctxt, msgid, msgid_plural or msgstr: {raw!r}.")
        keyword = match.group(1)
        if keyword in ("msgctxt", "msgid") and any(k.startswith("msgstr") for k in fields):
            finish()  # An entry may follow the previous one without a blank line.
        if keyword in fields:
            raise ValueError(f"{at}: {keyword} twice in one entry.")
        obsolete = obsolete or is_obsolete
        fields[keyword] = _unquote(match.group(3), at)
        current = keyword
    finish()
    return messages


def read_mo(data: bytes, where: str) -> list[Message]:
    """Parses a compiled `.mo` catalog (either byte order, format revision 0 or 1).

    Args:
      data: the file's bytes.
      where: how errors name the file.

    Returns:
      Its messages in the file's (sorted) order, the header included. Plural forms are split at
      NUL, a context at EOT, as msgfmt writes them; `.mo` files hold no fuzzy or obsolete ones.

    Raises:
      ValueError: not a `.mo` file, or truncated.
    """
    if len(data) < 20:
        raise ValueError(f"{where}: {len(data)} bytes, too short for a .mo file.")
    for order in "<>":
        if struct.unpack(order + "I", data[:4])[0] == _MO_MAGIC:
            break
    else:
        raise ValueError(f"{where}: not a .mo file (no gettext magic number).")
    revision, count, originals, translations = struct.unpack(order + "4I", data[4:20])
    if revision >> 16 not in (0, 1):
        raise ValueError(f"{where}: .mo format revision {revision >> 16}, expected 0 or 1.")

    def string(table: int, index: int) -> bytes:
        start = table + 8 * index
        if start + 8 > len(data):
            raise ValueError(f"{where}: truncated .mo file (string table entry {index}).")
        length, offset = struct.unpack(order + "2I", data[start : start + 8])
        if offset + length > len(data):
            raise ValueError(f"{where}: truncated .mo file (string {index}).")
        return data[offset : offset + length]

    raw = [(string(originals, i), string(translations, i)) for i in range(count)]
    header = next((t for o, t in raw if o == b""), b"")
    charset = _charset(header, where)
    messages = []
    for original, translated in raw:
        key = _decode(original, charset, where)
        context, _, key = key.rpartition("\x04") if "\x04" in key else (None, "", key)
        msgid, _, plural = key.partition("\x00")
        forms = tuple(_decode(translated, charset, where).split("\x00"))
        plural = plural if "\x00" in key else None
        messages.append(Message(msgid=msgid, msgstr=forms, context=context, plural=plural))
    return messages


def read_catalog(name: str, data: bytes, where: str) -> list[Message]:
    """Reads a `.po` or `.mo` file, by its name's ending."""
    if name.endswith(".po"):
        return read_po(data, where)
    if name.endswith(".mo"):
        return read_mo(data, where)
    raise ValueError(f"{where}: neither a .po nor a .mo file.")


def _ar_members(data: bytes, where: str) -> Iterator[tuple[str, bytes]]:
    """The members of a Unix `ar` archive (the container of a .deb)."""
    if not data.startswith(b"!<arch>\n"):
        raise ValueError(f"{where}: not a Debian package (no ar archive header).")
    at = 8
    while at + 60 <= len(data):
        header = data[at : at + 60]
        name = header[:16].decode("ascii").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        yield name, data[at + 60 : at + 60 + size]
        at += 60 + size + (size % 2)  # Members are padded to an even offset.


def archive_files(path: str, data: bytes, pattern: re.Pattern) -> list[tuple[str, bytes]]:
    """The files of a wheel or .deb whose member path matches `pattern` (re.search).

    Args:
      path: the archive's file name (`.whl` or `.deb`), for the kind and for errors.
      data: the archive's bytes.
      pattern: which member paths to return.

    Returns:
      (member path, bytes) pairs, sorted by path.

    Raises:
      ValueError: neither a wheel nor a .deb, a damaged archive, or a .deb compressed with
        something the standard library cannot read (zstd).
    """
    found = []
    if path.endswith(".whl"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for name in archive.namelist():
                    if pattern.search(name):
                        found.append((name, archive.read(name)))
        except zipfile.BadZipFile as e:
            raise ValueError(f"{path}: not a readable wheel ({e}).") from None
    elif path.endswith(".deb"):
        payload = [(n, d) for n, d in _ar_members(data, path) if n.startswith("data.tar")]
        if not payload:
            raise ValueError(f"{path}: a Debian package without a data.tar member.")
        name, tar_bytes = payload[0]
        if name.endswith(".zst"):
            raise ValueError(
                f"{path}: {name} is zstd-compressed, which Python cannot read; "
                f"pin a version of the package compressed with xz or gzip."
            )
        try:
            with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:*") as archive:
                for member in archive.getmembers():
                    clean = member.name.removeprefix("./")
                    if member.isfile() and pattern.search(clean):
                        found.append((clean, archive.extractfile(member).read()))
        except tarfile.TarError as e:
            raise ValueError(f"{path}: {name} is not a readable tar archive ({e}).") from None
    else:
        raise ValueError(f"{path}: expected a wheel (.whl) or a Debian package (.deb).")
    return sorted(found)
