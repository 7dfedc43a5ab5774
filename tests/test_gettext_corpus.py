"""benchmarks/gettext_corpus: the English-Spanish corpus from gettext catalogs, built offline
from tiny `.po`/`.mo` files, wheels and a Debian package that the tests write, with the
download command faked."""

from __future__ import annotations

import dataclasses
import gettext
import hashlib
import io
import json
import pathlib
import struct
import subprocess
import tarfile
import zipfile

import pytest

from benchmarks.gettext_corpus import build, catalogs, clean, download, sources
from transformer_jax.data.translation.text_files import read_aligned

# --- Writing catalogs and packages ------------------------------------------------------------


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


def wheel(path: pathlib.Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def deb(path: pathlib.Path, members: dict[str, bytes]) -> None:
    """A Debian package: an ar archive of debian-binary, control.tar.gz and data.tar.xz."""

    def tar(files: dict[str, bytes], compression: str) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode=f"w:{compression}") as archive:
            for name, data in files.items():
                info = tarfile.TarInfo("./" + name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        return buffer.getvalue()

    # A control archive of odd size: ar pads it to an even offset, which the reader must skip.
    control = next(c for n in range(64) if len(c := tar({"control": b"x" * n}, "gz")) % 2)
    parts = [
        ("debian-binary", b"2.0\n"),
        ("control.tar.gz", control),
        ("data.tar.xz", tar(members, "xz")),
    ]
    out = b"!<arch>\n"
    for name, data in parts:
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode()
        out += data + (b"\n" if len(data) % 2 else b"")
    path.write_bytes(out)


def source(cache: pathlib.Path, name: str, file: str, split: str, **kw) -> sources.Source:
    data = (cache / file).read_bytes()
    fields = {
        "version": "1.0",
        "registry": "debian" if file.endswith(".deb") else "pypi",
        "licence": f"{name}-licence",
        "catalogs": r"/es/LC_MESSAGES/[^/]+\.(po|mo)$",
        "accelerators": "",
        **kw,
    }
    return sources.Source(
        name=name, file=file, sha256=hashlib.sha256(data).hexdigest(), split=split, **fields
    )


def no_download(*args, **kwargs):
    raise AssertionError(f"a cached file was downloaded again: {args}")


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


# --- Building the corpus ----------------------------------------------------------------------


def po(*pairs: tuple[str, str], extra: str = "") -> bytes:
    body = "".join(f'msgid "{en}"\nmsgstr "{es}"\n\n' for en, es in pairs)
    return (HEADER + body + extra).encode()


ALPHA_EXTRA = """msgctxt "adjective"
msgid "Open"
msgstr "Abierto"

msgctxt "menu"
msgid "Open"
msgstr "Abrir"

#, fuzzy
msgid "Guess"
msgstr "Adivina"

#~ msgid "Old"
#~ msgstr "Viejo"

#. Default: "Save now"
msgid "label_save_now"
msgstr "Guardar ahora"

msgid "label_orphan"
msgstr "Huérfano"

msgid "One day"
msgid_plural "%d days"
msgstr[0] "Un día"
msgstr[1] "%d días"
"""


@pytest.fixture
def packages(tmp_path):
    """A cache holding four packages: two training wheels, one Debian package (train), one
    validation and one test wheel; returns (cache, sources)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    wheel(
        cache / "alpha-1.0-py3-none-any.whl",
        {
            # The .po and the .mo of one catalog: only the .po (which marks fuzzy) is read.
            "alpha/locale/es/LC_MESSAGES/django.po": po(
                ("Open", "Abrir"),
                ("Cancel", "Cancelar"),
                ("Delete %(n)s items", "Borrar %(n)s elementos"),
                ("PDF", "PDF"),
                ("Copy %s", "Copiar"),
                ("Save as...", "Guardar como..."),
                extra=ALPHA_EXTRA,
            ),
            "alpha/locale/es/LC_MESSAGES/django.mo": mo_bytes(
                {"Guess": "Adivina", "Open": "Abrir"}
            ),
            "alpha/locale/fr/LC_MESSAGES/django.po": po(("Open", "Ouvrir")),  # Not Spanish.
            "alpha/locale/es_MX/LC_MESSAGES/django.po": po(("Close", "Cerrar")),  # A variant.
        },
    )
    wheel(
        cache / "beta-2.0-py3-none-any.whl",
        {
            "beta/locale/es/LC_MESSAGES/beta.mo": mo_bytes(
                {
                    "": "Content-Type: text/plain; charset=UTF-8\n",
                    "_Print": "_Imprimir",
                    "Cancel": "Cancelar",
                }
            ),
        },
    )
    deb(
        cache / "gamma_3.0_all.deb",
        {
            "usr/lib/gamma/resource/es/LC_MESSAGES/sw.mo": mo_bytes(
                {"~Insert": "~Insertar", "Close": "Cerrar"}
            ),
        },
    )
    wheel(
        cache / "valid-1.0-py3-none-any.whl",
        {
            "valid/locale/es/LC_MESSAGES/django.po": po(
                ("Close", "Cerrar"), ("Add row", "Añadir fila")
            )
        },
    )
    wheel(
        cache / "test-1.0-py3-none-any.whl",
        {
            "test/locale/es/LC_MESSAGES/django.po": po(
                ("Save As", "Guardar como"), ("Add row", "Agregar fila"), ("Quit", "Salir")
            )
        },
    )
    table = (
        source(cache, "alpha", "alpha-1.0-py3-none-any.whl", "train"),
        source(
            cache, "beta", "beta-2.0-py3-none-any.whl", "train", version="2.0", accelerators="_"
        ),
        source(
            cache,
            "gamma",
            "gamma_3.0_all.deb",
            "train",
            accelerators="~",
            catalogs=r"/resource/es/LC_MESSAGES/[^/]+\.mo$",
        ),
        source(cache, "valid", "valid-1.0-py3-none-any.whl", "valid"),
        source(cache, "test", "test-1.0-py3-none-any.whl", "test"),
    )
    return cache, table


def lines(path: pathlib.Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_build_writes_split_cleaned_deduplicated_pairs_with_their_sources(tmp_path, packages):
    cache, table = packages
    out = tmp_path / "corpus"
    manifest = build.build(out, cache, table, runner=no_download, log=lambda _: None)

    pairs = {
        split: read_aligned(out / f"{split}.en", out / f"{split}.es")
        for split in ("train", "valid", "test")
    }
    # Held out whole: every test pair is from the test package, every valid one from valid.
    assert sorted(pairs["test"]) == [
        ("Add row", "Agregar fila"),
        ("Quit", "Salir"),
        ("Save As", "Guardar como"),
    ]
    # "Add row" is in test: validation loses it, keeps "Close".
    assert pairs["valid"] == [("Close", "Cerrar")]
    # Train: both translations of "Open" once each (the "menu" context repeats the first);
    # "Save as..." (test holds "Save As") and "Close" (validation holds it) gone; fuzzy,
    # obsolete, equal, mismatched placeholders, the .mo twin, other languages and variants left
    # out; the plural's first form; accelerator marks removed.
    assert sorted(pairs["train"]) == sorted(
        [
            ("Open", "Abrir"),
            ("Open", "Abierto"),
            ("Cancel", "Cancelar"),
            ("Delete {} items", "Borrar {} elementos"),
            ("One day", "Un día"),
            ("Save now", "Guardar ahora"),  # A Zope message id's default text.
            ("Print", "Imprimir"),
            ("Insert", "Insertar"),
        ]
    )
    assert manifest["pairs"] == {"train": 8, "valid": 1, "test": 3}

    records = [json.loads(line) for line in lines(out / "train.jsonl")]
    assert [(r["en"], r["es"]) for r in records] == pairs["train"]  # Line for line.
    by_en = {(r["en"], r["es"]): r for r in records}
    assert by_en[("Cancel", "Cancelar")]["package"] == "alpha"  # The first row gets the credit.
    assert by_en[("Insert", "Insertar")] == {
        "en": "Insert",
        "es": "Insertar",
        "package": "gamma",
        "version": "1.0",
        "licence": "gamma-licence",
        "catalog": "usr/lib/gamma/resource/es/LC_MESSAGES/sw.mo",
    }

    counts = manifest["counts"]
    assert counts["alpha"]["fuzzy"] == counts["alpha"]["obsolete"] == 1
    assert counts["alpha"]["equal"] == counts["alpha"]["placeholders differ"] == 1
    assert counts["alpha"]["identifier"] == 1  # "label_orphan", which has no default text.
    assert counts["alpha"]["repeated"] == 1 and counts["alpha"]["in a held-out split"] == 1
    assert counts["beta"]["repeated"] == 1  # "Cancel" again, in the same split.
    assert counts["gamma"]["in a held-out split"] == 1  # "Close".

    readme = (out / "README.md").read_text()
    for row in table:
        assert (
            f"| {row.name} | {row.version} | {row.registry} | {row.licence} | {row.split} |"
            in readme
        )
    assert "| train | 8 |" in readme and "| test | 3 |" in readme
    assert "text_train_src=DIR/train.en" in readme


def test_build_is_byte_identical_from_the_same_pins(tmp_path, packages):
    cache, table = packages
    first, second = tmp_path / "first", tmp_path / "second"
    build.build(first, cache, table, runner=no_download, log=lambda _: None)
    build.build(second, cache, table, runner=no_download, log=lambda _: None)
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    assert {"train.en", "train.es", "valid.en", "test.es", "README.md", "manifest.json"} <= set(
        names
    )
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    # Rebuilding over an earlier corpus replaces it with the same bytes.
    build.build(first, cache, table, runner=no_download, log=lambda _: None)
    assert all((first / n).read_bytes() == (second / n).read_bytes() for n in names)


def test_a_failed_download_names_the_package_and_command_and_writes_nothing(tmp_path, packages):
    cache, table = packages
    out = tmp_path / "corpus"
    build.build(out, cache, table, runner=no_download, log=lambda _: None)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (cache / table[1].file).unlink()  # beta must be fetched again.
    calls = []

    def refuse(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution found")

    with pytest.raises(download.DownloadError) as error:
        build.build(out, cache, table, runner=refuse, log=lambda _: None)
    message = str(error.value)
    assert "beta==2.0" in message and "pip download" in message and "beta==2.0`" in message
    assert "exited with status 1" in message and "No matching distribution" in message
    assert str(cache / table[1].file) in message  # Where to put the file by hand.
    assert len(calls) == 1 and calls[0][-1] == "beta==2.0"
    # The earlier corpus is untouched, nothing half-written lies beside it.
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "corpus"]
    assert not (cache / table[1].file).exists()
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []


def test_a_missing_apt_get_is_named_with_what_to_do(tmp_path, packages):
    cache, table = packages
    (cache / table[2].file).unlink()  # gamma, the Debian package.

    def absent(command, **kwargs):
        raise FileNotFoundError(command[0])

    with pytest.raises(
        download.DownloadError,
        match=r"gamma==1\.0 \(debian\).*`apt-get` was not found.*apt-get download gamma=1\.0",
    ):
        build.build(tmp_path / "corpus", cache, table, runner=absent, log=lambda _: None)
    assert not (tmp_path / "corpus").exists()


def test_fetch_runs_the_command_once_and_checks_the_bytes(tmp_path, packages):
    cache, table = packages
    gamma = table[2]
    data = (cache / gamma.file).read_bytes()
    empty = tmp_path / "empty"
    calls = []

    def apt_get(command, cwd, **kwargs):  # Writes where apt-get writes: the working folder.
        calls.append(command)
        (pathlib.Path(cwd) / "gamma_1%3a3.0_all.deb").write_bytes(data)
        return subprocess.CompletedProcess(command, 0, "", "")

    path = download.fetch(gamma, empty, apt_get)
    assert path == empty / gamma.file and path.read_bytes() == data
    assert calls == [["apt-get", "download", "gamma=1.0"]]
    assert download.fetch(gamma, empty, no_download) == path  # Cached: no second download.

    altered = dataclasses.replace(gamma, file="other.deb", sha256="0" * 64)
    with pytest.raises(download.DownloadError, match="sha256 .* but the pin says 0000"):
        download.fetch(altered, empty, apt_get)
    assert not (empty / "other.deb").exists()


def test_an_out_folder_of_other_files_is_refused(tmp_path, packages):
    cache, table = packages
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="holds files that this script did not write"):
        build.build(out, cache, table, runner=no_download, log=lambda _: None)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_the_command_line_reports_an_error_and_exits_1(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert build.main([f"--out={tmp_path}", f"--cache={tmp_path / 'cache'}"]) == 1
    assert "error: --out=" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()  # Refused before any download.


def test_the_pinned_table_is_usable():
    sources.check_sources(sources.SOURCES)
    names = {s.name for s in sources.SOURCES}
    assert {"libreoffice-l10n-es", "django", "sphinx"} <= names
    held_out = {s.split for s in sources.SOURCES if s.split != "train"}
    assert held_out == {"valid", "test"}
    with pytest.raises(ValueError, match="SOURCES row django: .*accelerators '!'"):
        sources.check_sources(
            [
                dataclasses.replace(s, accelerators="!") if s.name == "django" else s
                for s in sources.SOURCES
            ]
        )
