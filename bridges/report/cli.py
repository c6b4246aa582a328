"""``visgym report DIR [DIR...]``: rewrite the summary files and HTML report of each run, and
compare several runs side by side; a directory that is not a complete run is skipped with one
warning line.
"""
from __future__ import annotations

import argparse
import os
import sys

from .compare import write_comparison
from .runs import _load_runs, run_problem
from .summary import write_summary


def main_report(argv=None) -> int:
    """``visgym report DIR [DIR...] [--out OUT] [--no-html]``: rewrite each run's summary
    files and HTML report (DIR/report/index.html), then print the summary of a single run,
    or, for several runs (or with ``--out``), write comparison.md/.csv/.png/.html into OUT
    (default: the folder holding the first run directory) and print comparison.md. A
    directory that is not a complete run (``run_problem``) is skipped with one warning line.
    Returns the exit status: 2 when no directory could be reported, 1 on a write error."""
    parser = argparse.ArgumentParser(
        prog="visgym report",
        description="Summarise visgym eval run directories (success rates with 95% Wilson "
                    "intervals, an HTML report per run); several directories are also compared "
                    "side by side (comparison.md/.csv/.png/.html).",
    )
    parser.add_argument("run_dirs", nargs="+", metavar="DIR", help="results/<run> directory")
    parser.add_argument("--out", default=None, metavar="OUT",
                        help="folder for the comparison files (default: the folder holding the "
                             "first run directory)")
    parser.add_argument("--no-html", action="store_true",
                        help="skip the HTML reports (DIR/report/, OUT/comparison.html)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and on usage errors
        return int(exc.code or 0)

    usable, skipped = [], []
    for d in args.run_dirs:
        problem = run_problem(d)
        if problem is None:
            usable.append(d)
        else:
            skipped.append((d, problem))
            print(f"visgym report: warning: skipping {d}: {problem}", file=sys.stderr)
    if not usable:
        print("visgym report: error: no complete run directory to report", file=sys.stderr)
        return 2

    html = not args.no_html
    try:
        runs = _load_runs(usable)   # each episodes.jsonl read once for both reports
        for run in runs:
            paths = write_summary(run.dir, records=run.records, html=html)
            names = [os.path.relpath(p, run.dir) for p in paths.values()]
            print(f"visgym report: wrote {', '.join(names)} in {run.dir}", file=sys.stderr)
        if len(args.run_dirs) == 1 and args.out is None:
            with open(os.path.join(usable[0], "summary.md"), encoding="utf-8") as fh:
                sys.stdout.write(fh.read())
            return 0
        out = args.out or os.path.dirname(os.path.abspath(os.path.normpath(usable[0])))
        paths = write_comparison(runs, out, html=html, skipped=skipped)
        print(f"visgym report: wrote {', '.join(os.path.basename(p) for p in paths.values())} "
              f"in {out}", file=sys.stderr)
        with open(paths["md"], encoding="utf-8") as fh:
            sys.stdout.write(fh.read())
    except (OSError, ValueError) as exc:
        print(f"visgym report: error: {exc}", file=sys.stderr)
        return 1
    return 0
