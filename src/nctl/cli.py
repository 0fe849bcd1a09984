"""The ``nctl`` command line: list and run experiments, report and plot their results, manage data.

    nctl list
    nctl run NAME [--seeds N] [--first-seed S] [--set key=value ...] [--out DIR] [--data-dir DIR] [--resumable]
              [--seed-store DIR]
              [--executor local [--workers N] | --executor ray [--address ADDR] [--cpus-per-task N]
              [--gpus-per-task N]]
    nctl sweep NAME --grid key=v1,v2 [--grid ...] [the options of run but --seed-store]
    nctl report RESULTS... [--out FILE]     (results files, their folders, seed files or seed stores)
    nctl plot RESULTS... [--out DIR]
    nctl data download [NAME] | nctl data verify
    nctl saliency transition | nctl saliency pseudo-tasks
    nctl boundaries
    nctl pool-history

A user error (unknown experiment or setting, bad value, missing or corrupt data or results file, a
folder that cannot be written, seeds that failed) prints one line to stderr and exits with status 2;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from nctl import __version__, atomic, interrupts
from nctl.arguments import at_least
from nctl.data import cli as data_cli
from nctl.experiments import configs, executors, report, sweep
from nctl.experiments.run import SeedsFailed, config_folder, run
from nctl.inspect import cli as inspect_cli

DEFAULT_OUT = "results"
EXAMPLES = """examples:
  nctl list                        the experiments, how long a seed runs, the data each needs
  nctl run demo                    NCTL and GLN on a built-in stream (no download, about a minute)
  nctl report results/demo         the results as a markdown table
  nctl data download mnist         fetch a data set (into $NCTL_DATA, else ~/.cache/nctl)
  nctl run split-mnist --seeds 3 --workers 2
                                   three seeds, in two processes
  nctl run split-mnist --set steps_per_task=500
                                   a shorter run: 500 examples of each task

`nctl COMMAND --help` describes a command's options."""
USER_ERRORS = (ValueError, OSError, MemoryError, SeedsFailed)  # one line and exit status 2, unless --debug
USER_ERROR_STATUS = 2
INTERRUPTED_STATUS = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped


def _parse_settings(pairs: list[str]) -> dict[str, str]:
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--set expects key=value, got {pair!r}")
        settings[key] = value
    return settings


# The data set each stream reads (`nctl data download NAME`); the others are generated
STREAM_DATA = {"split_mnist": "mnist", "permuted_mnist": "mnist", "mnist_classes": "mnist", "free_split": "mnist",
               "split_fashion_mnist": "fashion-mnist", "electricity": "elec2"}
# Roughly how long one seed of each experiment runs with its default settings on a 2-core AMD EPYC (the
# wall_s of the results files under docs/results)
SEED_DURATION = {"demo": "1 min", "split-mnist": "15 min", "split-mnist-deskewed": "15 min",
                 "split-fashion-mnist": "45 min", "permuted-mnist": "hours", "permuted-mnist-deskewed": "1.5 h",
                 "permuted-mnist-deskewed-c256-exact": "60 min",
                 "permuted-mnist-deskewed-c256-bounded": "70 min",
                 "permuted-mnist-deskewed-c256-lr0.003-bounded": "70 min",
                 "permuted-mnist-deskewed-c512-lr0.003-bounded2": "60 min",
                 "permuted-mnist-deskewed-c1024-lr0.005-bounded1": "55-105 min",
                 "permuted-mnist-deskewed-c1024-lr0.005-bounded1-adapt50": "50-105 min",
                 "permuted-mnist-c256-bounded": "45 min", "permuted-mnist-reduced": "30-50 min",
                 "free-split-backward": "1-2 min", "free-split-forward": "1-2 min", "free-split-oracles": "1 min",
                 "elec2-5": "10 min", "elec2-8": "10 min", "mnist-gln": "20 s", "mnist-gln-deskewed": "2.5 min",
                 "regression-friedman-gra": "1.5 min", "regression-trump": "10 s", "regression-chickweights": "5 s",
                 "regression-recurring": "1.5 min"}


def _data_of(exp) -> str:
    return next((data for prefix, data in STREAM_DATA.items() if exp.stream.startswith(prefix)), "built-in")


def cmd_list(args) -> int:
    rows = [(name, f"{exp.seeds} seed{'s' if exp.seeds > 1 else ''}", SEED_DURATION.get(name, "?"), _data_of(exp),
             exp.description) for name, exp in configs.EXPERIMENTS.items()]
    rows.insert(0, ("name", "seeds", "per seed", "data", "description"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(f"{cell:<{width}}" for cell, width in zip(row, widths)) + "  " + row[4])
    print("\nper seed: on a 2-core CPU, with the default settings; data: `nctl data download NAME` fetches it")
    return 0


def _task_share(allow_zero: bool):
    """An argparse type: what a Ray task asks for of a resource, a number > 0 (or >= 0), whole above 1."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (value >= 0 if allow_zero else value > 0) or (value > 1 and not value.is_integer()):
            raise argparse.ArgumentTypeError(f"must be a number {'>=' if allow_zero else '>'} 0, whole above 1, "
                                             f"got {text!r}")
        return value

    return parse


def _executor(args):
    """The executor the options ask for; ValueError for an option of the other executor."""
    ray_options = {"--address": args.address, "--cpus-per-task": args.cpus_per_task,
                   "--gpus-per-task": args.gpus_per_task}
    if args.executor == "ray":
        if args.workers is not None:
            raise ValueError("--workers applies to --executor local; Ray runs as many tasks as its CPUs allow "
                             "(see --cpus-per-task)")
        return executors.ray_tasks(args.address, args.cpus_per_task or 1.0, args.gpus_per_task or 0.0)
    given = [option for option, value in ray_options.items() if value is not None]
    if given:
        raise ValueError(f"{given[0]} applies to --executor ray")
    return executors.local(args.workers or 1)


def _seeds(args, exp: configs.Experiment) -> range:
    return range(args.first_seed, args.first_seed + (exp.seeds if args.seeds is None else args.seeds))


def cmd_run(args) -> int:
    exp = configs.get(args.name).replace(_parse_settings(args.set))
    try:
        results = run(exp, _seeds(args, exp), args.out, data_dir=args.data_dir, executor=_executor(args),
                      progress=not args.quiet, resumable=args.resumable, seed_store=args.seed_store)
    except KeyboardInterrupt as stop:
        print(f"\n{stop}", file=sys.stderr)
        return INTERRUPTED_STATUS
    print(report.markdown([results]), end="")
    print(f"results: {config_folder(args.out, exp) / 'results.json'} (every seed of these settings; "
          f"copied to {Path(args.out) / exp.name / 'results.json'})")
    if args.seed_store is not None:
        print(f"seed files: {Path(args.seed_store) / (exp.name + '-seed-*.json')}")
    return 0


def cmd_sweep(args) -> int:
    base, fixed = configs.get(args.name), _parse_settings(args.set)
    grid = sweep.parse_grid(args.grid)
    try:
        numbers = sweep.sweep(base, fixed, grid, _seeds(args, base.replace(fixed)), args.out,
                              data_dir=args.data_dir, executor=_executor(args), progress=not args.quiet,
                              resumable=args.resumable)
    except KeyboardInterrupt as stop:
        print(f"\n{stop}", file=sys.stderr)
        return INTERRUPTED_STATUS
    print(sweep.markdown(numbers), end="")
    folder = Path(args.out) / args.name
    print(f"sweep: {folder / sweep.TABLE}, {folder / sweep.NUMBERS} (each setting's seeds and results.json: "
          f"{folder}/HASH/)")
    return 0


# what reading a results file whose structure is not the expected one can raise beyond the checks of
# ``report.load``; named with the file rather than shown as a traceback
STRUCTURE_ERRORS = (ValueError, KeyError, TypeError, AttributeError, IndexError, StopIteration, ZeroDivisionError)


def _failed_on(path, error: Exception) -> ValueError:
    detail = f"{type(error).__name__}: {error}" if not isinstance(error, ValueError) else str(error)
    return ValueError(f"{path} could not be read as a results file of `nctl run` ({detail})")


def cmd_report(args) -> int:
    loaded = report.load_all(args.results)
    for path, results in loaded:  # each file's table alone, so that an error names the file
        try:
            report.markdown([results])
        except STRUCTURE_ERRORS as error:
            raise _failed_on(path, error) from error
    text = report.markdown(results for _, results in loaded)
    if args.out is not None:
        atomic.check_writable(Path(args.out).parent)
        atomic.write_text(args.out, text)
    print(text, end="")
    return 0


def cmd_plot(args) -> int:
    from nctl import plots

    atomic.check_writable(args.out)
    for path, results in report.load_all(args.results):
        try:
            figures = plots.plot_results(results, args.out)
        except STRUCTURE_ERRORS as error:
            raise _failed_on(path, error) from error
        for figure in figures:
            print(figure)
    return 0


def _named_path(what: str):
    """An argparse type: a path that is not empty (an empty one would mean the current folder unsaid)."""
    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"must name a {what}, got {text!r}")
        return text

    return parse


def _run_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``nctl run`` (and ``nctl sweep``): the experiment, its seeds and settings, where
    results go and where seeds run."""
    parser.add_argument("name", help="experiment name (see `nctl list`)")
    parser.add_argument("--seeds", type=at_least(1), default=None, help="number of seeds (default: the experiment's)")
    parser.add_argument("--first-seed", type=at_least(0), default=0,
                        help="number of the first seed: the run has seeds FIRST..FIRST+SEEDS-1 (default 0)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting, e.g. --set nctl.pool_size=31 --set steps_per_task=500")
    parser.add_argument("--out", type=_named_path("folder"), default=DEFAULT_OUT,
                        help="results folder (default: ./results)")
    parser.add_argument("--data-dir", default=None, help="data folder (default: $NCTL_DATA, else the user cache)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--resumable", action="store_true",
                        help="task-matrix runs: save the learners at every task end (disk: one learner state "
                             "per running seed) so that an interrupted seed resumes there")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="where seeds run: processes of this machine (default), or Ray tasks")
    parser.add_argument("--workers", type=at_least(1), default=None,
                        help="local executor: seeds run in this many processes (default 1: in this one)")
    parser.add_argument("--address", default=None,
                        help="Ray executor: the cluster to join (e.g. auto); default: start a Ray on this machine")
    parser.add_argument("--cpus-per-task", type=_task_share(allow_zero=False), default=None,
                        help="Ray executor: CPUs each seed asks for (default 1)")
    parser.add_argument("--gpus-per-task", type=_task_share(allow_zero=True), default=None,
                        help="Ray executor: GPUs each seed asks for (default 0)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nctl", description="Neural Combinatorial Transfer Learning experiments",
                                     epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"nctl {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    sub.add_parser("list", help="show the experiments").set_defaults(func=cmd_list)

    run_parser = sub.add_parser("run", help="run an experiment and write its results file")
    _run_options(run_parser)
    run_parser.add_argument("--seed-store", type=_named_path("folder"), default=None, metavar="DIR",
                            help="a folder of finished seeds of this configuration, one small file each "
                                 "(NAME-seed-0007.json; e.g. under docs/results/ to commit them): its seeds "
                                 "are reused, each seed that finishes is added; a seed file there of another "
                                 "configuration is an error. `nctl report DIR` merges them")
    run_parser.set_defaults(func=cmd_run)

    sweep_parser = sub.add_parser("sweep", help="run a grid of settings and write one table of every setting's summary")
    _run_options(sweep_parser)
    sweep_parser.add_argument("--grid", action="append", required=True, metavar="KEY=V1,V2",
                              help="the values of one setting, each read as --set reads it, separated by commas, "
                                   "or by semicolons when the text holds one: "
                                   "--grid 'network.layer_sizes=[10,1];[20,1]'; repeat for every combination")
    sweep_parser.set_defaults(func=cmd_sweep)

    rep = sub.add_parser("report", help="markdown table of results beside the published anchors")
    rep.add_argument("results", nargs="+", help="results.json files or their folders; seed files of --seed-store "
                                                "or their folders, merged per configuration")
    rep.add_argument("--out", type=_named_path("file"), default=None, help="also write the table to this file")
    rep.set_defaults(func=cmd_report)

    plot = sub.add_parser("plot", help="figures (PNG) of results files")
    plot.add_argument("results", nargs="+", help="as for report")
    plot.add_argument("--out", type=_named_path("folder"), default="figures", help="folder for the PNG files")
    plot.set_defaults(func=cmd_plot)

    data_cli.add_parser(sub)
    inspect_cli.add_parsers(sub)
    for command in sub.choices.values():  # --debug after the command name too
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # a bare `nctl`: what it can do
        parser.print_help()
        return 0
    interrupts.install()  # a Ctrl-C before the first learning, in JAX's garbage-collector callback, is not lost
    try:
        return args.func(args)
    except USER_ERRORS as error:
        if args.debug:
            raise
        print(f"nctl: error: {error}", file=sys.stderr)
        return USER_ERROR_STATUS


def console() -> None:
    """The ``nctl`` program: ``main``, and its status as the process's. A run stopped by Ctrl-C ends the
    process at once, once its finished seeds are written and its output flushed: the computations it
    left running on XLA's threads would otherwise meet the interpreter's teardown, which then crashes."""
    status = main()
    if status == INTERRUPTED_STATUS:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    console()
