"""One CLI style (issue 60 item 3): every `sglang-mx` verb is registered the same way, and a flag
that more than one verb takes has one definition.

The parser is built from cli/main.py with add_argument wrapped to record where each option was
defined (file and line): a flag shared by verbs must come from one place (a shared add_*_args
helper), so it has one type, one set of choices, one action and one help text; its default may
differ only where PER_VERB_DEFAULTS says why. PER_VERB_MEANING lists the few flags whose help
names each verb's own file or endpoint; those still share type, choices and action. Old
spellings (capacity.flags.OldSpelling, cli/main.py OLD_VERBS) must print their one-line note."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import io
from collections import defaultdict
from pathlib import Path

import pytest
from sglang_mx.capacity.flags import OldSpelling
from sglang_mx.cli import main as cli_main

# flag -> why its default differs by verb (the help states each verb's)
PER_VERB_DEFAULTS = {
    "--workload": "bench measures a live CPU-box server (cpu-2k-32-60); plan and roofline model "
    "the production preset",
    "--hardware": "bench names no hardware unless told (no price); plan and roofline model MI355X",
    "--gpus": "bench: a node of --hardware; plan: 8",
    "--layout": "roofline compares four layouts, plan two (it also simulates PD)",
    "--page-size": "bench: the server's (1); plan: SGLang's default for the GPU",
    "--ignore-eos": "run, sweep, verify: the workload's lengths; sessions: the model's own ends",
    "--no-ignore-eos": "the negative of --ignore-eos",
    "--output-len": "calibrate streams 32 tokens; elsewhere the workload's",
    "-o": "each verb writes its own file or directory",
    "--out": "each verb writes its own file or directory",
    "--port": "serve: SGLang's 30000; provider: 8080",
    "--model": "bench: the server's first model; plan, roofline: glm-5.2 (see PER_VERB_MEANING)",
}
# flag -> why its help is the verb's own (type, choices and action are still one)
PER_VERB_MEANING = {
    "-o": "the file or directory this verb writes",
    "--out": "the file or directory this verb writes",
    "--db": "the provider's store this verb reads or writes (db import: the target)",
    "--host": "the address this verb's server listens on",
    "--port": "the port this verb's server listens on",
    "--json": "this verb's output as JSON",
    "--model": "bench: the served model's name; plan, roofline: the model to simulate (left "
    "for a rename: issue 60)",
}


def _recording_parser() -> argparse.ArgumentParser:
    """cli/main.py's parser, each action tagged with the file:line of its add_argument."""
    original = argparse._ActionsContainer.add_argument

    def add_argument(self, *args, **kwargs):
        action = original(self, *args, **kwargs)
        caller = inspect.stack(context=0)[1]
        action.defined_at = f"{Path(caller.filename).name}:{caller.lineno}"
        return action

    argparse._ActionsContainer.add_argument = add_argument
    try:
        return cli_main.build_parser()
    finally:
        argparse._ActionsContainer.add_argument = original


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(verb path, parser) of every parser under `parser`, itself included."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, (*path, name))


def _options(parsers) -> dict[str, list[tuple[str, argparse.Action]]]:
    by_flag = defaultdict(list)
    for path, parser in parsers:
        for a in parser._actions:
            if a.option_strings and not isinstance(a, (argparse._HelpAction, OldSpelling)):
                for flag in a.option_strings:
                    by_flag[flag].append((" ".join(path), a))
    return by_flag


def divergent_flags(parsers) -> list[str]:
    """One line per flag that two verbs define differently."""
    problems = []
    for flag, uses in sorted(_options(parsers).items()):
        if len({verb for verb, _ in uses}) < 2:
            continue
        checks = {
            "type": lambda a: getattr(a.type, "__qualname__", a.type),
            "choices": lambda a: None if a.choices is None else tuple(a.choices),
            "action": lambda a: type(a).__name__,
            "nargs": lambda a: a.nargs,
            "const": lambda a: a.const,
        }
        if flag not in PER_VERB_DEFAULTS:
            checks["default"] = lambda a: repr(a.default)
        if flag not in PER_VERB_MEANING:
            checks["help"] = lambda a: a.help
            checks["defined at"] = lambda a: getattr(a, "defined_at", "?")
        for what, read in checks.items():
            seen = defaultdict(list)
            for verb, a in uses:
                seen[read(a)].append(verb or "sglang-mx")
            if len(seen) > 1:
                ways = "; ".join(f"{v!r} in {', '.join(verbs)}" for v, verbs in seen.items())
                problems.append(f"{flag}: {what} differs: {ways}")
    return problems


def negation_pairs(parsers) -> list[str]:
    """`--no-X` as its own store_true where another verb has `--X`: one flag, two spellings."""
    flags = _options(parsers)
    return [
        f"{flag} and {'--' + flag[5:]}: use one BooleanOptionalAction"
        for flag, uses in flags.items()
        if flag.startswith("--no-")
        and "--" + flag[5:] in flags
        and any(isinstance(a, argparse._StoreTrueAction) for _, a in uses)
    ]


@pytest.fixture(scope="module")
def parsers():
    return list(walk(_recording_parser()))


def test_a_flag_two_verbs_take_has_one_definition(parsers):
    assert divergent_flags(parsers) == []
    assert negation_pairs(parsers) == []


def test_the_check_fails_on_a_planted_divergent_flag(parsers):
    """A verb that declares its own --input-len (an int, where the shared one is a length
    distribution) and its own --slo-ttft (same type, written by hand) is caught."""
    planted = argparse.ArgumentParser(prog="planted")
    planted.add_argument("--input-len", type=int, help="tokens in")
    planted.add_argument("--slo-ttft", dest="slo", type=float, metavar="S")
    problems = divergent_flags([*parsers, (("planted",), planted)])
    assert any(p.startswith("--input-len: type differs") and "'int'" in p for p in problems)
    assert any(p.startswith("--slo-ttft: help differs") for p in problems)
    assert all(p.split(":")[0] in ("--input-len", "--slo-ttft") for p in problems), problems
    twin = argparse.ArgumentParser(prog="twin")
    twin.add_argument("--no-prime", action="store_true")
    twin.add_argument("--prime", action="store_true")
    assert negation_pairs([*parsers, (("twin",), twin)])


def test_every_verb_is_a_module_with_register_in_its_levels_table():
    """cli/main.py SUBCOMMANDS, bench/cli/verbs.py VERBS, provider/cli.py ACTIONS: each module's
    register(subparsers) adds exactly the parser its table names, and that parser sets func."""
    from sglang_mx.bench.cli.verbs import VERBS
    from sglang_mx.provider.cli import ACTIONS

    for table in (cli_main.SUBCOMMANDS, VERBS, ACTIONS):
        for name, module in table.items():
            sub = argparse.ArgumentParser().add_subparsers()
            importlib.import_module(module).register(sub)
            assert list(sub.choices) == [name], f"{module}: registers {list(sub.choices)}"
            leaves = [p for _, p in walk(sub.choices[name]) if not any(
                isinstance(a, argparse._SubParsersAction) for a in p._actions)]  # fmt: skip
            assert all(callable(p.get_default("func")) for p in leaves), module


def _old_spellings(parsers):
    for path, parser in parsers:
        for a in parser._actions:
            if isinstance(a, OldSpelling):
                yield " ".join(path), a


def test_old_spellings_say_their_new_name(parsers):
    old = {(verb, a.option_strings[0]): a.new for verb, a in _old_spellings(parsers)}
    assert old == {
        ("bench gen", "--preset"): "--workload",
        ("bench run", "--preset"): "--workload",
        ("bench sweep", "--preset"): "--workload",
        ("bench sessions", "--format"): "--trace-format",
        **{
            (v, "--slo"): "--slo-ttft" for v in ("bench run", "bench sweep", "bench verify", "plan")
        },
        **{
            (v, "--tpot-slo"): "--slo-tpot"
            for v in ("bench run", "bench sweep", "bench verify", "plan")
        },
    }
    for verb, action in _old_spellings(parsers):
        flag, args = action.option_strings[0], argparse.Namespace()
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            action(None, args, "2", flag)
        note = err.getvalue().strip()
        assert note.count("\n") == 0 and f"{flag} is now {action.new}" in note, (verb, note)
        assert "until the next release" in note and getattr(args, action.dest) == "2"
        assert action.help == argparse.SUPPRESS  # not offered in --help, only still read
    err = io.StringIO()  # and through the whole parser, into the new flag's value
    with contextlib.redirect_stderr(err):
        args = cli_main.build_parser().parse_args(["plan", "--rates", "1", "--tpot-slo", "0.2"])
    assert args.slo_tpot == 0.2 and "--tpot-slo is now --slo-tpot" in err.getvalue()


def test_old_verb_keys_is_read_as_provider_keys(capsys):
    assert cli_main.new_spelling(["keys", "list", "--db", "x"]) == [
        "provider",
        "keys",
        "list",
        "--db",
        "x",
    ]
    assert "`keys` is now `provider keys`" in capsys.readouterr().err
    assert cli_main.new_spelling(["plan"]) == ["plan"]


def test_shared_flags_parse_to_one_type():
    """--input-len is a length distribution everywhere (a plain N is every request N tokens), and
    roofline reads its mean; the SLO flags make one metrics.Slo in plan and bench."""
    from sglang_mx.capacity.cli import workload_from_args
    from sglang_mx.capacity.workload import LengthDist
    from sglang_mx.measure.run_flags import slo_from_args

    parser = cli_main.build_parser()
    roof = parser.parse_args(["roofline", "--input-len", "uniform:1000:3000", "--output-len", "7"])
    assert roof.input_len == LengthDist("uniform", value=2000, lo=1000, hi=3000)
    assert (workload_from_args(roof).input_len, workload_from_args(roof).output_len) == (2000, 7)
    run = ["--url", "u", "--tokenizer", "t", "--input-len", "2000"]
    bench = parser.parse_args(["bench", "run", *run])
    assert bench.input_len == LengthDist("fixed", 2000) and bench.ignore_eos is True
    slo = ["--slo-ttft", "2", "--slo-itl", "0.1", "--slo-e2e", "9", "--slo-percentile", "99"]
    planned = parser.parse_args(["plan", "--rates", "1", *slo])
    measured = parser.parse_args(["bench", "sweep", *run, "--rates", "1", *slo])
    assert slo_from_args(planned) == slo_from_args(measured)
    assert slo_from_args(planned).itl_s == 0.1 and slo_from_args(planned).percentile == 99
    with pytest.raises(SystemExit):
        with contextlib.redirect_stderr(io.StringIO()):
            parser.parse_args(["roofline", "--input-len", "lots"])


def test_one_workload_name():
    from sglang_mx.capacity.workload import PRESETS, named_workload

    assert named_workload("20k-1k-60") is PRESETS["production-20k-1k-60"]
    assert named_workload("20k-2k-60").name == "20k-2k-60"
