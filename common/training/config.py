"""A chapter's settings: plain UPPER_CASE constants in its `config.py`, changed from the command line.

    uv run python phase1_foundation/project1_gpt/train.py --MAX_ITERS=200 --DEVICE=cpu

Each `--NAME=value` is parsed to the type of the constant it replaces, so a typo or a wrong type stops the
run in its first second with one line that says what to write instead, not after an hour with a traceback.
A chapter also declares `PRESETS = {"gpu": {...}, "cpu": {...}}`: the device picks one (`--PRESET=` forces
it), so the same command trains a real model on a GPU and still finishes in minutes on a laptop CPU.
"""

import difflib
import inspect
import re
import sys
from types import ModuleType, SimpleNamespace

from common.errors import CourseError
from common.training.device import pick_device

_SCALARS = (bool, int, float, str, tuple, type(None))
_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}


def settings(module: ModuleType) -> dict:
    """The overridable constants of a config module: UPPER_CASE names holding a scalar or a tuple.

    Dicts (the paper's reference configurations, PRESETS) are documentation, not settings.
    """
    return {
        name: value
        for name, value in vars(module).items()
        if name.isupper() and not name.startswith("_") and isinstance(value, _SCALARS)
    }


def parse_value(name: str, text: str, default):
    """Turn the text after `--NAME=` into a value of the same type as the default."""
    kind = type(default)
    try:
        if default is None:
            return None if text.lower() == "none" else text
        if kind is bool:
            if text.lower() in _TRUE | _FALSE:
                return text.lower() in _TRUE
            raise ValueError
        if kind is int:
            number = float(text.replace("_", ""))  # accepts 2000, 2_000 and 2e3
            if not number.is_integer():
                raise ValueError
            return int(number)
        if kind is float:
            return float(text)
        if kind is tuple:
            element = type(default[0]) if default else str
            parts = [part.strip() for part in text.split(",") if part.strip()]
            return tuple(parse_value(name, part, element()) for part in parts)
        return text
    except ValueError:
        if kind is tuple:
            example = ",".join(map(str, default))
        else:
            example = str(default).lower() if kind is bool else default
        raise CourseError(
            f"error: --{name} expects {_type_name(default)} (like --{name}={example}), got {text!r}"
        ) from None


def _type_name(default) -> str:
    if isinstance(default, tuple):
        return "a comma-separated list"
    return {bool: "true or false", int: "an integer", float: "a number", str: "text"}[type(default)]


def parse_overrides(argv: list[str], defaults: dict) -> dict:
    """`--NAME=value` arguments -> {NAME: typed value}; anything else is a mistake worth one clear line."""
    overrides = {}
    for arg in argv:
        match = re.fullmatch(r"--([A-Za-z_][A-Za-z0-9_]*)=(.*)", arg, flags=re.S)
        if not match:
            raise CourseError(f"error: cannot read {arg!r}; settings are written --NAME=value (see --help)")
        name, text = match.groups()
        if name not in defaults:
            close = difflib.get_close_matches(name.upper(), defaults, n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}?" if close else "run with --help to list them"
            raise CourseError(f"error: unknown setting {name}; {hint}")
        overrides[name] = parse_value(name, text, defaults[name])
    return overrides


def load_config(module: ModuleType, argv: list[str] | None = None) -> SimpleNamespace:
    """Defaults, then the preset the device implies, then the command line; printed so that every run says
    what it did."""
    argv = sys.argv[1:] if argv is None else argv
    defaults = settings(module)
    if "--help" in argv or "-h" in argv:
        print(help_text(module))
        sys.exit(0)  # as argparse does after --help
    overrides = parse_overrides(argv, defaults)

    device = pick_device(overrides.get("DEVICE", defaults["DEVICE"]))
    preset = overrides.get("PRESET", defaults["PRESET"])
    if preset == "auto":
        preset = "cpu" if device.type == "cpu" else "gpu"
    if preset not in module.PRESETS:
        choices = ", ".join(module.PRESETS)
        raise CourseError(f"error: unknown preset {preset!r}; choose one of {choices} or auto")
    unknown = set(module.PRESETS[preset]) - set(defaults)
    assert not unknown, f"preset {preset} names unknown settings {unknown}"

    values = {**defaults, **module.PRESETS[preset], **overrides, "DEVICE": str(device), "PRESET": preset}
    print(describe_config(values, module.PRESETS[preset], overrides, preset, device.type))
    return SimpleNamespace(**values)


def describe_config(values: dict, preset_values: dict, overrides: dict, preset: str, device_type: str) -> str:
    """The effective configuration, marking what the preset and the command line changed."""
    why = {"cpu": "no GPU found", "gpu": "a GPU was found"}.get(preset, "")
    forced = "PRESET" in overrides
    lines = [f"preset: {preset} ({'set by --PRESET' if forced else why + ' on ' + device_type})"]
    for name, value in values.items():
        if name in overrides:
            source = "  <- command line"
        else:
            source = f"  <- preset {preset}" if name in preset_values else ""
        lines.append(f"  {name:<22} {value!r}{source}")
    return "\n".join(lines)


def help_text(module: ModuleType) -> str:
    """Every setting with its default and the comment beside it in config.py."""
    comments = dict(re.findall(r"^([A-Z][A-Z0-9_]*)\s*=.*?#\s*(.*)$", inspect.getsource(module), flags=re.M))
    lines = [f"Settings of {module.__name__} (override with --NAME=value):"]
    for name, value in settings(module).items():
        lines.append(f"  --{name}={value!r}  {comments.get(name, '')}".rstrip())
    lines.append(f"Presets: {', '.join(module.PRESETS)} (--PRESET=auto picks by device)")
    return "\n".join(lines)
