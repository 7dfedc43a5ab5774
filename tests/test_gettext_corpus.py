"""benchmarks/gettext_corpus: the English-Spanish corpus from gettext catalogs: reading tiny
`.po` and `.mo` files that the tests write, and cleaning their pairs."""

from __future__ import annotations

import gettext
import io
import struct

import pytest

from benchmarks.gettext_corpus import catalogs, clean

# --- Writing catalogs ----------------------------------------------------------------------


def mo_bytes(entries: dict[str, str], order: str = "<") -> bytes:
    """A `.mo` file holding `entries` (keys as msgfmt writes them: context EOT msgid NUL
    plural), in the byte order `order`."""
    keys = sorted(entries, key=lambda k: k.encode())
    originals = [k.encode() for k in keys]
    translations = [entries[k].encode() for k in keys]
    count = len(keys)
    start = 28 + 16 * count
    blob, table_o, table_t = b"", b"", b""
    for strings, which in ((originals, "o"), (translations, "t")):
        for s in strings:
            entry = struct.pack(order + "2I", len(s), start + len(blob))
            if which == "o":
                table_o += entry
            else:
                table_t += entry
            blob += s + b"\0"
    header = struct.pack(order + "7I", 0x950412DE, 0, count, 28, 28 + 8 * count, 0, 0)
    return header + table_o + table_t + blob


HEADER = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'


# --- Reading catalogs -------------------------------------------------------------------------


PO = (
    HEADER
    + """# A translator's comment.
#: app.py:1
msgid "Open"
msgstr "Abrir"

#, fuzzy, python-format
msgid "Guess %s"
msgstr "Adivina %s"

msgctxt "month"
msgid "May"
msgstr "Mayo"
msgid "Two\\tparts \\"quoted\\" and \\\\"
"continued\\n"
msgstr ""
"Dos\\tpartes \\"citadas\\" y \\\\"
"seguido\\n"

msgid "One file"
msgid_plural "%d files"
msgstr[0] "Un archivo"
msgstr[1] "%d archivos"

#. Default: "Save \\"now\\""
msgid "label_save"
msgstr "Guardar"

msgid "Untranslated"
msgstr ""

#~ msgid "Gone"
#~ msgstr "Ido"
"""
)


def test_read_po_keeps_every_field_of_every_entry():
    messages = catalogs.read_po(PO.encode(), "t.po")
    assert [m.msgid for m in messages] == [
        "",
        "Open",
        "Guess %s",
        "May",
        'Two\tparts "quoted" and \\continued\n',
        "One file",
        "label_save",
        "Untranslated",
        "Gone",
    ]
    m = {x.msgid: x for x in messages}
    assert m["Open"] == catalogs.Message("Open", ("Abrir",))
    assert m["Guess %s"].fuzzy and not m["Open"].fuzzy
    assert m["May"].context == "month" and m["May"].msgstr == ("Mayo",)
    assert m['Two\tparts "quoted" and \\continued\n'].msgstr == (
        'Dos\tpartes "citadas" y \\seguido\n',
    )
    assert m["One file"].plural == "%d files"
    assert m["One file"].msgstr == ("Un archivo", "%d archivos")
    assert m["label_save"].default == 'Save "now"' and m["Open"].default is None
    assert m["Untranslated"].msgstr == ("",)
    assert m["Gone"].obsolete and m["Gone"].msgstr == ("Ido",) and not m["Open"].obsolete


def test_read_po_decodes_the_charset_its_header_names():
    text = 'msgid ""\nmsgstr "Content-Type: text/plain; charset=ISO-8859-1\\n"\n\n'
    text += 'msgid "Song"\nmsgstr "Canción"\n'
    messages = catalogs.read_po(text.encode("latin-1"), "t.po")
    assert messages[-1].msgstr == ("Canción",)
    with pytest.raises(ValueError, match=r"t\.po: not valid utf-8"):
        catalogs.read_po(HEADER.encode() + 'msgid "a"\nmsgstr "ó"\n'.encode("latin-1"), "t.po")


@pytest.mark.parametrize(
    "text, where",
    [
        ('msgid "a"\nmsgstr "b"\nbogus "c"\n', "t.po:3"),
        ('msgid "a"\nmsgstr "b\n', "t.po:2"),
        ('"stray"\n', "t.po:1"),
        ('msgid "a"\nmsgid "b"\n', "t.po:2"),
    ],
)
def test_read_po_names_the_line_of_a_syntax_error(text, where):
    with pytest.raises(ValueError, match=where.replace(".", r"\.")):
        catalogs.read_po(text.encode(), "t.po")


@pytest.mark.parametrize("order", ["<", ">"])
def test_read_mo_reads_contexts_and_plurals_in_either_byte_order(order):
    entries = {
        "": "Content-Type: text/plain; charset=UTF-8\n",
        "Open": "Abrir",
        "month\x04May": "Mayo",
        "One file\x00%d files": "Un archivo\x00%d archivos",
    }
    data = mo_bytes(entries, order)
    # The stdlib reads the same bytes the same way: the writer above is a real .mo writer.
    reference = gettext.GNUTranslations(io.BytesIO(data))
    assert reference.pgettext("month", "May") == "Mayo"
    assert reference.ngettext("One file", "%d files", 2) == "%d archivos"

    messages = {m.msgid: m for m in catalogs.read_mo(data, "t.mo")}
    assert messages["Open"] == catalogs.Message("Open", ("Abrir",))
    assert messages["May"] == catalogs.Message("May", ("Mayo",), context="month")
    assert messages["One file"] == catalogs.Message(
        "One file", ("Un archivo", "%d archivos"), plural="%d files"
    )


def test_read_mo_refuses_damaged_files():
    with pytest.raises(ValueError, match="not a .mo file"):
        catalogs.read_mo(b"\0" * 40, "t.mo")
    data = mo_bytes({"Open": "Abrir"})
    with pytest.raises(ValueError, match="truncated"):
        catalogs.read_mo(data[:-8], "t.mo")


# --- Cleaning pairs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "english, spanish, expected",
    [
        (
            "Delete %(count)d of %(total)s",
            "Borrar %(count)d de %(total)s",
            ("Delete {} of {}", "Borrar {} de {}"),
        ),
        ("%(a)s by %(b)s", "%(b)s de %(a)s", ("{} by {}", "{} de {}")),  # Reordered: same slots.
        ("Copy %s to %s", "Copiar %s a %s", ("Copy {} to {}", "Copiar {} a {}")),
        ("File {0} of {name}", "Archivo {0} de {name}", ("File {} of {}", "Archivo {} de {}")),
        ("Hello ${user}", "Hola ${user}", ("Hello {}", "Hola {}")),
        ("Row %1 of %2", "Fila %1 de %2", ("Row {} of {}", "Fila {} de {}")),
        (
            "Symbol $(ARG1) unknown",
            "Símbolo $(ARG1) desconocido",
            ("Symbol {} unknown", "Símbolo {} desconocido"),
        ),
        ("Restart %PRODUCTNAME", "Reiniciar %PRODUCTNAME", ("Restart {}", "Reiniciar {}")),
        ("Edit {{ name }} now", "Editar {{name }} ya", ("Edit {} now", "Editar {} ya")),
        ("50% off, %d%%", "50 % menos, %d%%", ("50% off, {}%", "50 % menos, {}%")),
        ("Copy %s", "Copiar", "placeholders differ"),
        ("Copy %(a)s", "Copiar %(b)s", "placeholders differ"),
        ("Copy {0}", "Copiar {1}", "placeholders differ"),
    ],
)
def test_placeholders_are_masked_alike_or_the_pair_left_out(english, spanish, expected):
    assert clean.clean_pair(english, spanish) == expected


@pytest.mark.parametrize(
    "english, spanish, marks, expected",
    [
        ("~Open", "~Abrir", "~_", ("Open", "Abrir")),
        ("Pa~ges:", "Pá~ginas:", "~_", ("Pages:", "Páginas:")),
        ("_Save", "_Guardar", "~_", ("Save", "Guardar")),
        ("A_pply to %MODULE", "Aplicar a _%MODULE", "~_", ("Apply to {}", "Aplicar a {}")),
        ("&Open", "A&brir", "&", ("Open", "Abrir")),
        ("Save && &quit", "Guardar && &salir", "&", ("Save & quit", "Guardar & salir")),
        ("Drag & Drop", "Arrastrar & soltar", "&", ("Drag & Drop", "Arrastrar & soltar")),
        ("Fish &amp; &Chips", "Pescado &amp; &patatas", "&", ("Fish & Chips", "Pescado & patatas")),
        (
            "Reorder_Gramps_ID",
            "Reordenar_ID_Gramps",
            "_",
            ("Reorder_Gramps_ID", "Reordenar_ID_Gramps"),
        ),
        ("B&W outline", "Contorno B&N", "_", ("B&W outline", "Contorno B&N")),  # Not gramps' style.
        ("~Open", "~Abrir", "", ("~Open", "~Abrir")),  # A web application: no marks at all.
    ],
)
def test_accelerator_marks_are_removed_in_the_packages_styles(english, spanish, marks, expected):
    assert clean.clean_pair(english, spanish, marks) == expected


@pytest.mark.parametrize(
    "english, spanish, expected",
    [
        ("Click <b>here</b>", "Pulse <b>aquí</b>", "markup"),
        ("Matches the <regex_name>", "Coincide con la <expresión>", "markup"),
        ("PDF", "pdf", "equal"),
        ("%s ZB", "%s ZB", "equal"),  # Equal once masked.
        ("...", "…", "no letter"),
        ("label_compare_revision", "Comparar", "identifier"),
        ("Open", " \n ", "empty"),
        ("Bell\x07", "Campana\x07", "control character"),
        (
            "  Two\nlines\u2028and\u00a0more\t",
            "Dos\r\nlíneas",
            ("Two lines and more", "Dos líneas"),
        ),
        ("Cafe\u0301", "Cafe\u0301 abierto", ("Café", "Café abierto")),  # NFC.
    ],
)
def test_pairs_are_left_out_for_a_named_reason_or_normalised(english, spanish, expected):
    assert clean.clean_pair(english, spanish) == expected


def test_leak_key_ignores_case_punctuation_and_spacing():
    assert clean.leak_key("Save As...") == clean.leak_key("save  as:") == clean.leak_key("Save as")
    assert clean.leak_key("Save") != clean.leak_key("Save as")
