"""Error messages for bad magic options that name the valid choices (no --help needed)."""
from __future__ import annotations

import re

DEVICES = ("auto", "cpu", "cuda")
REPORTS = ("auto", "widget", "text", "none")
_CHOICES: dict[str, tuple] = {}
_FLAGS = ("--dynamic", "--static", "--fullgraph", "--explain", "--verify", "--now", "-o/--output NAME")


def help_texts(modes, backends, devices, reports) -> str:
    """The one-line list of ``%%compile`` options (the ``%nbaccel`` commands are listed from
    their table, nbaccel/magics/commands.py COMMANDS)."""
    _CHOICES.update({"--mode": tuple(modes), "--backend": tuple(backends), "--device": tuple(devices),
                     "--report": tuple(reports)})
    return options_help()


def options_help() -> str:
    """The one-line list of ``%%compile`` options."""
    return ", ".join([f"{k} {{{','.join(v)}}}" for k, v in _CHOICES.items()] + list(_FLAGS))


def parse_error(msg: str, options_help: str) -> str:
    """argparse's message plus the valid choices."""
    m = re.search(r"argument (-\w|--[\w-]+)(?:/(--[\w-]+))?: expected one argument", msg)
    if m:
        opt = m.group(2) or m.group(1)
        if opt in _CHOICES:
            return f"{opt} needs a value: one of {', '.join(_CHOICES[opt])}"
        return f"{opt} needs a value"
    return f"{msg}; the options are {options_help}"
