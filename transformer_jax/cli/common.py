"""What every command line shares: its flags, the one error wrapper, and lines in and out.

Flags are absl flags, as in `train.py`, whose `--config.key=value` overrides come from
ml_collections' `config_flags` (built on absl): one syntax everywhere, `--flag=value` or
`--flag value`, `--noflag` for a boolean. Each command defines its flags on its own
`absl.flags.FlagValues`, so commands can run one after another in one process (tests, notebooks).

Exit codes: 0 done; 1 an error that names what to fix (`error: ...`, one line, no traceback);
2 a bad command line (an unknown flag, a value of the wrong type, a missing --workdir).

Lines in: a file (`--input`) or standard input, read as bytes and checked by
`transformer_jax.data.files.decode_utf8`: a leading byte-order mark is dropped; invalid UTF-8,
UTF-16/32 text or a NUL byte is an error naming the input, the line and the column (nothing is
silently replaced). Lines are split by `transformer_jax.data.files.split_lines`: on "\\n" only,
CRLF works, and U+2028, U+0085, form feeds and lone "\\r"s stay inside their line (unlike
`str.splitlines`). An empty input is zero lines. Texts given as flags (`--text`, `--prompt`)
must be valid Unicode too (a shell can pass undecodable bytes).

Lines out: exactly one line per input line, in order. `one_line` turns line breaks inside an
answer into spaces (generate escapes them instead, to keep the text exact).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import pathlib
import sys
from collections.abc import Callable, Sequence
from typing import BinaryIO

from absl import flags

from transformer_jax.data.files import decode_utf8, split_lines
from transformer_jax.runs.layout import CheckpointError
from transformer_jax.serving_mesh import FLAG_HELP as MESH_HELP
from transformer_jax.serving_mesh import MeshError

STDIN = "<stdin>"  # How errors name standard input.
USAGE_ERROR = 2  # Exit code of a bad command line.
HELP_FLAGS = ("-h", "--help", "-help", "--helpshort", "--helpfull")


class UsageError(ValueError):
    """A command line that does not parse: the message says which flag or argument."""


def parse_command_line(
    prog: str,
    define: Callable[[flags.FlagValues], None],
    argv: Sequence[str],
    default_config: pathlib.Path | None = None,
) -> tuple[flags.FlagValues, list[str]]:
    """Fresh flags defined by `define` and parsed from `argv`, and the positional arguments left.

    Raises:
      UsageError: a flag `define` lacks, a bad value, or a `--config.` override that does not
        fit the config (one line saying which).
    """
    fv = flags.FlagValues()
    root = config_root(list(argv), default_config)  # A config may import the modules beside it.
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        with argv_as([prog, *argv]):
            define(fv)
            args = fv([prog, *argv])[1:]
    except flags.Error as e:
        raise UsageError(str(e)) from e
    except (AttributeError, KeyError, TypeError, ValueError) as e:  # ml_collections' refusals
        problem = f"a --config override does not fit the config: {config_problem(e)}"
        raise UsageError(problem) from e
    return fv, args


@contextlib.contextmanager
def argv_as(argv: list[str]):
    """sys.argv set to `argv` for a while: ml_collections' config flags find the `--config.`
    overrides they accept in sys.argv, so a command line parsed in-process must be there."""
    saved = sys.argv
    sys.argv = list(argv)
    try:
        yield
    finally:
        sys.argv = saved


# ------------------------------------------------------------------------------ the flags
def workdir_flag(fv: flags.FlagValues, what: str = "run") -> None:
    """`--workdir` (required): the train.py workdir to read."""
    flags.DEFINE_string("workdir", None, f"The train.py workdir of the {what}.", flag_values=fv)
    flags.mark_flag_as_required("workdir", flag_values=fv)


def checkpoint_flags(fv: flags.FlagValues, *, average: bool = False) -> None:
    """`--step` (default the latest) and, with `average`, `--average_last`."""
    flags.DEFINE_integer(
        "step", None, "Checkpoint step to load (default: the latest).", flag_values=fv
    )
    if average:
        flags.DEFINE_integer(
            "average_last",
            0,
            "Average the parameters of the last N checkpoints up to --step (paper §6.1: 5).",
            flag_values=fv,
        )


def mesh_flag(fv: flags.FlagValues) -> None:
    """`--mesh`: serve on a device mesh (see `transformer_jax.serving_mesh`)."""
    flags.DEFINE_string("mesh", None, MESH_HELP, flag_values=fv)


def batch_size_flag(fv: flags.FlagValues, default: int, what: str) -> None:
    """`--batch_size`: how many inputs go through the model at once."""
    flags.DEFINE_integer("batch_size", default, f"{what} per batch.", flag_values=fv)


def decoding_flags(fv: flags.FlagValues) -> None:
    """Beam size, length penalty and output length of translation (translate, evaluate)."""
    flags.DEFINE_integer(
        "beam_size", 4, "Beam size K (paper: 4); 1 decodes greedily.", flag_values=fv
    )
    flags.DEFINE_float("alpha", 0.6, "Length-penalty exponent (paper: 0.6).", flag_values=fv)
    flags.DEFINE_integer(
        "max_len",
        None,
        "Most output tokens (default: source length + 50, at most the model's positions).",
        flag_values=fv,
    )


def at_least(value: int, minimum: int, flag: str) -> int:
    """`value`, or a ValueError naming `flag` when it is below `minimum`."""
    if value < minimum:
        raise ValueError(f"--{flag} must be >= {minimum}, got {value}.")
    return value


# ------------------------------------------------------------------------ running a command
@dataclasses.dataclass(frozen=True)
class Command:
    """A command line: its name, what it does, its flags and its body.

    `body(fv, args)` gets the parsed flags and the positional arguments (empty unless
    `positional` names them) and returns an exit code (None = 0). It may raise any of the
    errors a user can fix (`CheckpointError`, `MeshError`, `ValueError`, `TypeError`,
    `OSError`, an `ImportError` naming the extra to install): `run` prints them as one
    `error: ...` line and returns 1.
    """

    prog: str
    doc: str
    define: Callable[[flags.FlagValues], None]
    body: Callable[[flags.FlagValues, list[str]], int | None]
    positional: str | None = None  # e.g. "IMAGE ..." when the command takes arguments
    usage_flags: str = "--workdir=DIR"  # The flags the usage line shows.

    def usage(self) -> str:
        args = f" [{self.positional}]" if self.positional else ""
        return f"usage: {self.prog} {self.usage_flags} [flags]{args}"

    def help(self, fv: flags.FlagValues) -> str:
        """The usage line, the command's docstring and its flags (absl's own left out)."""
        modules = [m for m in fv.flags_by_module_dict() if not m.startswith("absl.")]
        listed = [
            line for m in modules for line in fv.module_help(m).splitlines() if line[:1] == " "
        ]
        return f"{self.usage()}\n\n{self.doc.strip()}\n\nflags:\n" + "\n".join(listed) + "\n"

    def parse(self, argv: Sequence[str]) -> tuple[flags.FlagValues, list[str]]:
        """The command's flags parsed from `argv`, and its positional arguments; nothing runs.

        Raises:
          UsageError: a flag the command lacks, a bad value, an argument it takes none of, or a
            `--config.` override that does not fit the config (one line saying which).
        """
        fv, args = parse_command_line(self.prog, self.define, argv)
        if args and not self.positional:
            raise UsageError(f"unexpected arguments {args}: every input is a --flag=value.")
        return fv, args

    def run(self, argv: Sequence[str] | None = None) -> int:
        """Parses `argv` (default: the process's arguments) and runs the body."""
        argv = list(sys.argv[1:] if argv is None else argv)
        if any(a in HELP_FLAGS for a in argv):
            fv = flags.FlagValues()
            self.define(fv)
            sys.stdout.write(self.help(fv))
            return 0
        try:
            fv, args = self.parse(argv)
        except UsageError as e:
            print(f"error: {e}\n{self.usage()}  (--help lists the flags)", file=sys.stderr)
            return USAGE_ERROR
        quiet_logs()
        try:
            return self.body(fv, args) or 0
        except MeshError as e:
            print(f"error: --mesh={fv['mesh'].value}: {e}", file=sys.stderr)
        except (CheckpointError, ValueError, TypeError, OSError, ImportError) as e:
            print(f"error: {e}", file=sys.stderr)  # ImportError: an extra to install, named
        return 1


def config_root(argv: Sequence[str], default: pathlib.Path | None = None) -> pathlib.Path | None:
    """The folder above the package of the `--config` file in `argv` (or of `default`), which
    goes on the import path so that a config may import its neighbours (`configs.common`)."""
    path = default
    for i, arg in enumerate(argv):
        if arg.startswith("--config="):
            path = pathlib.Path(arg.split("=", 1)[1])
        elif arg == "--config" and i + 1 < len(argv):
            path = pathlib.Path(argv[i + 1])
    if path is None:
        return None
    folder = path.resolve().parent
    return folder.parent if (folder / "__init__.py").is_file() else None


def config_problem(error: BaseException) -> str:
    """One line from ml_collections' refusal of a config field (a KeyError inside an
    AttributeError, its text quoted, with a "Did you mean" line)."""
    while error.args and isinstance(error.args[0], BaseException):
        error = error.args[0]
    return "; ".join(str(error.args[0] if error.args else error).splitlines())


def quiet_logs() -> None:
    """Keep stderr for warnings and the progress bar (Orbax logs every restore at INFO)."""
    logging.getLogger("absl").setLevel(logging.WARNING)


# ------------------------------------------------------------------------------ lines in
def read_input_lines(path: str | os.PathLike | None = None) -> list[str]:
    """The lines of a UTF-8 file, or of standard input when `path` is None.

    Raises:
      ValueError: invalid UTF-8, UTF-16/32 or a NUL byte (naming input, line and column).
      OSError: the file cannot be read.
    """
    if path is None:
        data, where = sys.stdin.buffer.read(), STDIN
    else:
        with open(path, "rb") as f:
            data, where = f.read(), os.fspath(path)
    return split_lines(decode_utf8(data, where))


def input_name(number: int, flag: str | None = None) -> str:
    """How an error names input number `number` (from 1): line 3 of stdin is `<stdin>:3`, the
    third `--text` flag `--text #3`."""
    return f"{flag} #{number}" if flag else f"{STDIN}:{number}"


def check_arguments(texts: Sequence[str], flag: str) -> list[str]:
    """`texts` given on the command line, refused if a shell passed undecodable bytes
    (Python keeps them as lone surrogates, which no tokenizer or output can take)."""
    for number, text in enumerate(texts, start=1):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            byte = ord(text[e.start]) & 0xFF  # A surrogate U+DC80..U+DCFF keeps the raw byte.
            raise ValueError(
                f"{input_name(number, flag)}: not valid UTF-8 (byte 0x{byte:02x} at character "
                f"{e.start + 1}). Pass UTF-8 text."
            ) from None
    return list(texts)


def texts_or_stdin(texts: Sequence[str] | None, flag: str) -> tuple[list[str], str | None]:
    """(the inputs, the flag that gave them) from a repeatable flag, else stdin's lines."""
    if texts is None:
        return read_input_lines(), None
    return check_arguments(texts, flag), flag


# ------------------------------------------------------------------------------ lines out
def one_line(text: str) -> str:
    """`text` with each line break ("\\r\\n", "\\r" or "\\n") made a space: one output line."""
    return text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")


def write_lines(lines: Sequence[str], file: BinaryIO | None = None) -> None:
    """Writes `lines` (each without line breaks), each ended by "\\n", as UTF-8, to a binary
    `file` or to standard output. File names that are not UTF-8 are written as their bytes."""
    data = "".join(line + "\n" for line in lines).encode("utf-8", errors="surrogateescape")
    if file is None:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        file.write(data)
