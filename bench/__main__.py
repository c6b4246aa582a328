"""Entry point of ``python -m visgym.bench``: dispatches to the benchmark suites."""
import argparse
import sys

from . import broker, demos, mjx_gpu, rl, rollouts, serve, step


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m visgym.bench")
    sub = parser.add_subparsers(dest="suite", required=True)
    step.add_parser(sub)
    demos.add_parser(sub)
    mjx_gpu.add_parser(sub)
    broker.add_parser(sub)
    rl.add_parser(sub)
    rollouts.add_parser(sub)
    serve.add_parser(sub)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
