"""The ``visgym`` command line.

``visgym eval``: evaluate an agent (an OpenAI-compatible model, or offline: the solver, random
actions, a replay) on the evaluation splits; with no agent options it runs the solver agent on
every implemented task, offline (this is ``make demo``).
``visgym report DIR...``: rebuild the summaries of runs and compare them side by side.
``visgym demos``: synthesize solver demonstrations for finetuning (``demos mix``, ``demos export``).
``visgym rollouts``: collect RL rollouts from an OpenAI-compatible policy server (``rollouts
export``: a Parquet file of them).
``visgym gifs``: roll the solver through a few episodes of any env ids and write captioned GIFs
(a quick look at a family).
``visgym list``: the tasks (what ``--tasks`` takes) and their env ids (what ``--envs`` takes).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from ..core import list_envs, make


def rollout(env_id: str, episodes: int, seed: int, max_frames: int = 64):
    """Solve ``episodes`` episodes of ``env_id`` together (core/rollout.py's ``run_plans``);
    return per episode its frames and captions (at most ``max_frames``), and the rewards."""
    from ..core.rollout import run_plans

    env = make(env_id, num_envs=episodes, autoreset="disabled", max_steps=None)
    frames, _ = env.reset(seeds=range(seed, seed + episodes))
    plans = env.solve()
    recorded = [[env.frame(b).copy()] for b in range(episodes)]   # each episode's own size
    captions = [[] for _ in range(episodes)]

    def on_step(t, frames, reward, terminated, truncated, info, active):
        for b in np.flatnonzero(active).tolist():
            if len(recorded[b]) < max_frames:
                captions[b].append([f"step {t}", f"action: {plans[b][t]}",
                                    f"feedback: {info['feedback'][b]}"])
                recorded[b].append(env.frame(b).copy())

    result = run_plans(env, plans, on_step)
    for b in range(episodes):   # frame k is captioned with the action taken from it
        shown = len(recorded[b]) - 1
        captions[b].append([f"final state after {shown} steps", f"reward={result.reward[b]:.3f}"]
                           if shown == result.steps[b] else
                           [f"state after {shown} of {result.steps[b]} steps (GIF cut at "
                            f"{max_frames} frames)"])
    return recorded, captions, result.reward


def cmd_gifs(args) -> int:
    from .gifs import write_episode_gif

    os.makedirs(args.out, exist_ok=True)
    start = time.perf_counter()
    summary = []
    for env_id in args.envs.split(","):
        recorded, captions, total = rollout(env_id, args.episodes, args.seed)
        for b, frames in enumerate(recorded):
            name = env_id.replace("/", "_") + f"_seed{args.seed + b}.gif"
            write_episode_gif(os.path.join(args.out, name), frames, captions[b])
        summary.append(f"{env_id} {int((total > 0).sum())}/{len(total)}")
    elapsed = time.perf_counter() - start
    print(f"gifs: solver success {'; '.join(summary)}; GIFs in {args.out}/ ({elapsed:.1f} s)")
    return 0


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-._" else "-" for c in text).strip("-") or "run"


def _explicit_prompt_flags(args) -> dict:
    """The prompt options given on the command line, as PromptSettings values (absent ones left
    out: their argparse default is None)."""
    given = {}
    if args.elicit_verbalization is not None:
        given["elicit_verbalization"] = True
    if args.no_feedback is not None:
        given["feedback"] = False
    if args.history is not None:
        given["history"] = args.history
    if args.max_long_side is not None:
        given["max_long_side"] = None if args.max_long_side <= 0 else args.max_long_side
    if args.text_mode is not None:
        given["text_mode"] = True
    if args.final_goal is not None:
        given["final_goal"] = True
    return given


def _read_prompt_manifest(folder: str):
    """The prompt settings of a demonstrations folder's manifest.json (checked field by
    field), and the manifest's path."""
    from .prompts import PromptSettings

    path = os.path.join(folder, "manifest.json")
    if not os.path.isdir(folder):
        raise ValueError(f"--prompt-from: {folder} is not a folder (expected the --out folder "
                         "of 'visgym demos')")
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"--prompt-from: {path} does not exist (expected the --out folder "
                         "of 'visgym demos')") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"--prompt-from: {path} is not valid JSON ({e})") from None
    prompt = manifest.get("prompt") if isinstance(manifest, dict) else None
    return PromptSettings.from_manifest(prompt, path), path


def _prompt_settings(args, env_ids: list[str]):
    """The run's prompt settings (bridges/prompts.py): the flags given, or with
    ``--prompt-from DIR`` the settings the demonstrations were made with (a flag that says
    otherwise is refused); ``max_steps`` holds the per-task budgets they were made with."""
    from dataclasses import replace

    from .prompts import FLAGS, PromptSettings

    given = _explicit_prompt_flags(args)
    if not args.prompt_from:
        return replace(PromptSettings(), **given)
    settings, path = _read_prompt_manifest(args.prompt_from)
    problem = settings.contradiction(given, path)
    if problem:
        raise ValueError(problem)
    budgets = settings.max_steps
    if args.max_steps is not None:
        other = {k: v for k, v in budgets.items() if k in env_ids and v != args.max_steps}
        if other:
            name, steps = sorted(other.items())[0]
            raise ValueError(f"--prompt-from: --max-steps {args.max_steps} contradicts the "
                             f"demonstrations' max_steps {steps} for {name} in {path} (drop the "
                             "flag, or evaluate without --prompt-from)")
    settings = replace(settings, max_steps={k: budgets[k] for k in sorted(budgets)
                                            if k in env_ids})
    unknown = sorted(set(env_ids) - set(budgets))
    if unknown:
        print(f"eval: {', '.join(unknown)} not in the demonstrations' max_steps ({path}); "
              "their default budget applies", file=sys.stderr)
    print(f"eval: prompt settings from {path}: " + ", ".join(
        f"{name}={json.dumps(getattr(settings, name))}" for name in FLAGS)
        + f", max_steps={json.dumps(settings.max_steps or None)}", file=sys.stderr)
    return settings


def _add_prompt_options(parser, final_goal: bool = True) -> None:
    """The prompt options (bridges/prompts.py) of ``eval`` and ``rollouts``."""
    parser.add_argument("--history", type=int, default=None,
                        help="turns of history sent (default: -1, the whole conversation)")
    parser.add_argument("--max-long-side", type=int, default=None,
                        help="JPEG long side in px, 0: no resizing (default: 336)")
    parser.add_argument("--text-mode", action="store_true", default=None,
                        help="ASCII observations instead of images")
    if final_goal:
        parser.add_argument("--final-goal", action="store_true", default=None,
                            help="show the solved configuration in the first turn")
    else:
        parser.set_defaults(final_goal=None)
    parser.add_argument("--no-feedback", action="store_true", default=None,
                        help="leave the environment's feedback out of the next turn")
    parser.add_argument("--elicit-verbalization", action="store_true", default=None,
                        help="ask for <think>...</think><answer>...</answer> replies")
    parser.add_argument("--prompt-from", default=None, metavar="DIR",
                        help="take the prompt settings (the options above) from the "
                        "manifest.json of a 'visgym demos' folder, e.g. for a model finetuned "
                        "on it; a flag that contradicts them is refused (default: none)")


def _add_generation_options(parser, temperature: float | None = None) -> None:
    """The generation, request and fault options of the runs that talk to an endpoint."""
    parser.add_argument("--temperature", type=float, default=temperature,
                        help="default: the endpoint's" if temperature is None else None)
    parser.add_argument("--max-tokens", type=int, default=8192)
    parser.add_argument("--top-p", type=float, default=None, help="default: the endpoint's")
    parser.add_argument("--reasoning-effort", default=None, help="default: the endpoint's")
    parser.add_argument("--extra-body", default=None,
                        help="JSON object merged into each request (default: none)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    parser.add_argument("--max-attempts", type=int, default=6,
                        help="attempts per request (429, 5xx and connection errors are retried)")
    parser.add_argument("--http-transport", choices=["auto", "lean", "httpx"], default="auto",
                        help="HTTP client under the openai SDK: lean (less CPU per request), "
                        "httpx (the SDK's own; supports proxies), auto: lean unless a proxy "
                        "applies")
    parser.add_argument("--no-preflight", action="store_true",
                        help="skip the check of the endpoint (reachable, key accepted, model "
                        "served) made before the first episode")
    parser.add_argument("--abort-after", type=int, default=8, metavar="N",
                        help="stop the run when its first N requests, or N in a row, fail the "
                        "same way for a reason retries do not cure (0: never); finished episodes "
                        "are kept for --resume")


def _generation_settings(args):
    """The ``GenerationSettings`` of the generation options (``--extra-body`` checked)."""
    from .agents import GenerationSettings

    extra_body = None
    if args.extra_body:
        try:
            extra_body = json.loads(args.extra_body)
        except json.JSONDecodeError as e:
            raise ValueError(f"--extra-body: not valid JSON ({e.msg})") from None
        if not isinstance(extra_body, dict):
            raise ValueError("--extra-body: must be a JSON object")
    return GenerationSettings(temperature=args.temperature, max_tokens=args.max_tokens,
                              top_p=args.top_p, reasoning_effort=args.reasoning_effort,
                              extra_body=extra_body)


def _command_line(args, name: str, url_flags=("--base-url",)) -> str:
    """The command as typed, minus credentials: an endpoint URL may carry user:password@."""
    from .agents import redact_url

    command = [redact_url(a) if args.base_url and a == args.base_url else a for a in args.argv]
    for flag in url_flags:
        command = [(f"{flag}=" + redact_url(a.split("=", 1)[1])) if a.startswith(f"{flag}=")
                   else a for a in command]
    return f"visgym {name} " + " ".join(command)


def cmd_eval(args) -> int:
    from .agents import make_agent
    from .evaluate import EvalConfig, error_lines, run_eval
    from .splits import SPLITS, load_reference_layout, load_split, tasks_with_splits

    agent_kind = args.agent or ("openai" if args.model else "solver")
    splits = list(SPLITS) if args.split == "all" else [args.split]
    available = tasks_with_splits()
    tasks = args.tasks.split(",") if args.tasks else available
    for task in tasks:
        if task not in available:
            raise ValueError(f"--tasks: unknown or unavailable task {task!r} "
                             f"(available: {', '.join(available)}; see 'visgym list')")
    prompt = _prompt_settings(args, [f"{t}/{s}" for t in tasks for s in splits])
    if prompt.text_mode:
        from ..core import make_family

        for task in tasks:
            if not make_family(f"{task}/easy").has_text_mode:
                raise ValueError(f"--text-mode: {task} has no text rendering (families with one: "
                                 + ", ".join(t for t in available
                                             if make_family(f"{t}/easy").has_text_mode) + ")")
    episodes, skipped = [], 0
    for split in splits:
        if args.dataset_root:
            found, bad = load_reference_layout(args.dataset_root, split, tasks)
            episodes += found
            skipped += bad
        else:
            for task in tasks:
                episodes += load_split(task, split)[: args.episodes]
    if args.dataset_root and args.episodes:
        per_task = {}
        kept = []
        for e in episodes:
            per_task[e.env_id] = per_task.get(e.env_id, 0) + 1
            if per_task[e.env_id] <= args.episodes:
                kept.append(e)
        episodes = kept
    if skipped:
        print(f"eval: skipped {skipped} unparsable episode lines under {args.dataset_root}",
              file=sys.stderr)
    if not episodes:
        raise ValueError("no episodes to run (check --tasks, --split and --dataset-root)")
    settings = _generation_settings(args)
    name = args.model or agent_kind
    suffix = "_text" * prompt.text_mode + "_goal" * prompt.final_goal
    out = args.out or os.path.join("results", _slug(f"{name}_{args.split}{suffix}"))
    args.out_resolved = out
    config = EvalConfig(out=out, split=args.split, concurrency=args.concurrency,
                        gifs=not args.no_gifs and args.gifs != 0, gifs_per_task=args.gifs,
                        resume=args.resume, progress=not args.quiet, processes=args.processes,
                        preflight=not args.no_preflight, abort_after=args.abort_after,
                        full_size_frames=args.full_size_frames, max_steps=args.max_steps,
                        **EvalConfig.prompt_fields(prompt))
    config.validate()
    agent = make_agent(agent_kind, model=args.model, base_url=args.base_url,
                       api_key_env=args.api_key_env, settings=settings, timeout_s=args.timeout,
                       max_attempts=args.max_attempts, replay=args.replay, seed=args.seed,
                       http_transport=args.http_transport)
    provenance = {"dataset": os.path.abspath(args.dataset_root) if args.dataset_root
                  else "shipped splits", "command": _command_line(args, "eval")}
    if args.prompt_from:
        provenance["prompt_from"] = os.path.abspath(args.prompt_from)
    print(f"eval: {agent_kind} agent{' ' + args.model if args.model else ''}, "
          f"{len(episodes)} episodes of {len(tasks)} task(s), split {args.split} -> {out}",
          file=sys.stderr)
    paths = run_eval(agent, config, episodes, provenance)
    with open(paths["md"]) as f:
        print(f.read())
    lines = error_lines(paths.get("errors") or {})
    if lines:
        print("Failed requests (the server's most common error per task):")
        for line in lines:
            print(f"- {line}")
    spoiled = paths.get("server_spoiled") or 0
    if spoiled:
        print(f"visgym eval: {spoiled} episode(s) spoiled by the server (a request failed after "
              "its retries): they count in no success rate; rerun with --resume to play them "
              "again", file=sys.stderr)
        return 1
    return 0


def cmd_rollouts(args) -> int:
    from .rollout_policy import TokenOpenAIAgent
    from .rollouts import RolloutConfig, run_rollouts
    from .splits import SPLITS, tasks_with_splits

    splits = list(SPLITS) if args.split == "all" else [args.split]
    available = tasks_with_splits()
    tasks = args.tasks.split(",") if args.tasks else available
    for task in tasks:
        if task not in available:
            raise ValueError(f"--tasks: unknown task {task!r} (available: "
                             f"{', '.join(available)}; see 'visgym list')")
    if args.require_logprobs and args.no_logprobs:
        raise ValueError("--require-logprobs: cannot be combined with --no-logprobs")
    env_ids = [f"{t}/{s}" for s in splits for t in tasks]
    prompt = _prompt_settings(args, env_ids)
    args.out_resolved = args.out
    config = RolloutConfig(
        env_ids=env_ids, episodes=args.episodes, group_size=args.group_size, out=args.out,
        seed=args.seed, reward=args.reward, max_steps=args.max_steps,
        budgets=dict(prompt.max_steps), concurrency=args.concurrency, processes=args.processes,
        ray_address=args.ray, history=prompt.history,
        max_long_side=prompt.max_long_side, text_mode=prompt.text_mode,
        include_feedback=prompt.feedback, elicit_verbalization=prompt.elicit_verbalization,
        max_parse_errors=args.max_parse_errors, require_logprobs=args.require_logprobs,
        full_size_frames=args.full_size_frames, resume=args.resume, progress=not args.quiet,
        preflight=not args.no_preflight, abort_after=args.abort_after).validate()
    agent = TokenOpenAIAgent(model=args.model, base_url=args.base_url,
                             api_key_env=args.api_key_env, settings=_generation_settings(args),
                             timeout_s=args.timeout, max_attempts=args.max_attempts,
                             http_transport=args.http_transport,
                             request_tokens=not args.no_logprobs,
                             require_logprobs=args.require_logprobs)
    total = len(env_ids) * args.episodes * args.group_size
    print(f"rollouts: {args.model}, {args.episodes} start(s) x {args.group_size} of "
          f"{len(env_ids)} env id(s) ({total} trajectories) -> {args.out}", file=sys.stderr)
    summary = run_rollouts(agent, config, {"command": _command_line(
        args, "rollouts", ("--base-url", "--policy-url"))})
    reasons = ", ".join(f"{k} {v}" for k, v in summary["stop_reasons"].items()) or "none"
    print(f"rollouts: {summary['played']} trajectories played ({reasons}), "
          f"{summary['recorded_before']} recorded before; policy {summary['policy_s']:.1f} s, "
          f"env {summary['env_s']:.1f} s; records in {os.path.join(args.out, 'episodes.jsonl')}")
    return 0


def cmd_rollouts_export(args) -> int:
    from .rollout_export import export_parquet

    rows = export_parquet(args.dir, args.path)
    print(f"export: {rows} trajectories -> {args.path} (load with datasets.load_dataset("
          f"\"parquet\", data_files={str(args.path)!r}, split=\"train\"))")
    return 0


def served_ids(tasks: str, split: str) -> list:
    """``--tasks`` of ``visgym serve``: env ids (``maze_2d/easy``) and task names, which take
    ``--split``."""
    from .splits import SPLITS

    splits = list(SPLITS) if split == "all" else [split]
    ids = []
    for entry in (t.strip() for t in tasks.split(",")):
        if not entry:
            raise ValueError(f"--tasks: an empty entry in {tasks!r}")
        ids += [entry] if "/" in entry else [f"{entry}/{s}" for s in splits]
    for env_id in ids:
        if env_id not in list_envs():
            raise ValueError(f"--tasks: unknown task or env id {env_id!r} (see 'visgym list')")
    return ids


def cmd_serve(args) -> int:
    try:
        from ..integrations.openenv import ServeConfig, serve
    except ImportError as error:
        raise ValueError(f"OpenEnv is not installed ({error}); pip install "
                         f"'visgym[openenv]'") from None
    env_ids = served_ids(args.tasks, args.split)
    config = ServeConfig(
        tasks=env_ids, sessions=args.sessions,
        max_long_side=None if args.full_size_frames else args.max_long_side,
        reward=args.reward, gamma=args.gamma,
        max_steps="default" if args.max_steps is None else args.max_steps,
        window_s=args.window_ms / 1000.0, ray_address=args.ray,
        ray_actors=args.ray_actors).validate()

    def listening(port):
        print(f"visgym serve: {', '.join(env_ids)} at http://{args.host}:{port} (OpenEnv "
              f"sessions at ws://{args.host}:{port}/ws; up to {config.sessions} per worker)",
              file=sys.stderr, flush=True)

    serve(config, args.host, args.port, workers=args.workers, port_file=args.port_file,
          log_level=args.log_level, on_listen=listening)
    return 0


def _parse_range(text: str | None):
    if not text:
        return None
    try:
        lo, hi = (int(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--num-steps: expected LO,HI (two integers), got {text!r}") from None
    return (lo, hi)


def cmd_demos(args) -> int:
    from .demos import DemoConfig, generate
    from .splits import tasks_with_splits

    available = tasks_with_splits()
    tasks = args.tasks.split(",") if args.tasks else available
    for task in tasks:
        if task not in available:
            raise ValueError(f"--tasks: unknown task {task!r} (available: {', '.join(available)})")
    strategy = None if args.strategy in (None, "default") else args.strategy
    configs = [DemoConfig(task=t, split=args.split, episodes=args.episodes, strategy=strategy,
                          shard_size=args.shard_size, seed=args.seed,
                          num_steps=_parse_range(args.num_steps), max_steps=args.max_steps,
                          max_long_side=None if args.max_long_side <= 0 else args.max_long_side,
                          full_size_frames=args.full_size_frames)
               for t in tasks]
    try:
        manifest = generate(configs, args.out, workers=args.workers, ray_address=args.ray,
                            progress=not args.quiet,
                            exclude_dataset_roots=args.exclude_dataset_root or ())
    except KeyboardInterrupt:
        print("\nvisgym demos: interrupted; finished shards are kept (rerun the same command "
              "to continue)", file=sys.stderr)
        return 130
    for name, d in manifest["datasets"].items():
        print(f"{name}: {d['episodes']} episodes ({d['images']} images; {d['attempted']} "
              f"attempts: {d['dropped_unsuccessful']} unsuccessful and "
              f"{d['skipped_eval_overlap']} evaluation overlaps redrawn)")
    names = ",".join(manifest["datasets"])
    recipe = os.path.join(os.path.abspath(args.out), manifest["llamafactory"]["recipe"])
    print(f"demos: datasets {names} in {os.path.join(args.out, 'dataset_info.json')} "
          f"({manifest['run']['elapsed_s']:.1f} s)")
    print(f"demos: LlamaFactory recipe {recipe} (dataset_dir {os.path.abspath(args.out)}, "
          f"dataset {names}); train with: llamafactory-cli train {recipe}")
    return 0


def cmd_demos_mix(args) -> int:
    from .demos import mix

    weights = [float(w) for w in args.weights.split(",")] if args.weights else None
    summary = mix(args.sources, args.out, args.total, weights, args.seed)
    for src in summary["sources"]:
        print(f"{src['source']}: {src['count']}")
    print(f"mix: {summary['total']} episodes in {args.out}/mixture/mixture.jsonl (dataset "
          f"mixture in {os.path.join(args.out, 'dataset_info.json')})")
    recipe = os.path.join(os.path.abspath(args.out), summary["llamafactory"]["recipe"])
    print(f"mix: LlamaFactory recipe {recipe}; train with: llamafactory-cli train {recipe}")
    return 0


def cmd_demos_export(args) -> int:
    from .demos import export_hf, list_datasets

    names = [args.dataset] if args.dataset else list_datasets(args.dir)
    for name in names:
        target = os.path.join(args.out, name)
        ds = export_hf(args.dir, name, target)
        print(f"export: {name} -> {target} ({len(ds)} episodes)")
    return 0


def cmd_report(args) -> int:
    from .report import main_report

    return main_report(args.dirs)


def _no_default(action) -> bool:
    """An option without a default value to show: None, a flag's False, or suppressed."""
    return action.default is None or action.default is False or \
        action.default == argparse.SUPPRESS


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default, unless the text already says it; flags
    (off unless given) and options without a default value are left as written."""

    def _get_help_string(self, action):
        text = action.help or ""
        if ("default" in text or _no_default(action) or action.required
                or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"

    def _format_action(self, action):
        if action.help is None and action.option_strings and not action.required and \
                not _no_default(action):
            action.help = "default: %(default)s"   # an option given no help still shows it
        return super()._format_action(action)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


EXIT_CODES = ("exit status: 0 done; 1 stopped by a failure to fix (an unwritable or full disk, "
              "an endpoint that fails its requests), or done with episodes the server spoiled: "
              "finished episodes are kept and --resume continues (and replays the spoiled "
              "ones); 2 bad arguments or settings; 130 interrupted (Ctrl-C)")


def cmd_warmup(args) -> int:
    from .warmup import is_cold, warm_up_all

    tasks = sorted({i.split("/")[0] for i in list_envs()})
    wanted = args.tasks.split(",") if args.tasks else tasks
    for task in wanted:
        if task not in tasks:
            raise ValueError(f"--tasks: unknown task {task!r} (available: {', '.join(tasks)})")
    if args.processes is not None and args.processes < 1:
        raise ValueError(f"--processes: must be at least 1, got {args.processes}")
    ids = [i for i in list_envs() if i.split("/")[0] in wanted]
    start = time.perf_counter()
    warm_up_all([(i, {}) for i in ids], announce=not args.quiet, processes=args.processes)
    cold = [i for i in ids if is_cold(i)]
    if cold:
        raise ValueError(f"kernels of {', '.join(cold)} are still not cached (see the errors "
                         "above; is the package folder writable?)")
    print(f"warmup: kernels of {len(ids)} env ids cached ({time.perf_counter() - start:.1f} s)")
    return 0


def cmd_list(args) -> int:
    """What --tasks takes (task families with both splits) and what --envs / visgym.make take
    (every registered id); ``--ids``: only the ids, one a line."""
    from .splits import tasks_with_splits

    ids = list_envs()
    if args.ids:
        print("\n".join(ids))
        return 0
    tasks = tasks_with_splits()
    width = max([len("TASK (--tasks)")] + [len(t) for t in tasks]) + 2
    print(f"{'TASK (--tasks)':<{width}}ENV IDS (--envs, visgym.make)")
    for task in tasks:
        print(f"{task:<{width}}{', '.join(i for i in ids if i.split('/')[0] == task)}")
    others = [i for i in ids if i.split("/")[0] not in tasks]
    if others:
        print(f"{'(no splits)':<{width}}{', '.join(others)}")
    return 0


def _os_error_text(error: OSError) -> str:
    """``PATH: reason (errno N NAME)``: the one line an I/O failure is reported with."""
    import errno as errno_names

    reason = error.strerror or str(error) or type(error).__name__
    code = ""
    if error.errno:
        name = errno_names.errorcode.get(error.errno)
        code = f" (errno {error.errno}{' ' + name if name else ''})"
    where = error.filename
    if where is not None and getattr(error, "filename2", None) is not None:
        where = f"{where} -> {error.filename2}"
    return f"{where}: {reason}{code}" if where is not None else f"{reason}{code}"


def main(argv=None) -> int:
    from .. import __version__

    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) >= 2 and argv[0] == "demos" and argv[1] in ("mix", "export"):
        argv = [f"demos-{argv[1]}"] + argv[2:]
    if len(argv) >= 2 and argv[0] == "rollouts" and argv[1] == "export":
        argv = ["rollouts-export"] + argv[2:]
    parser = _Parser(prog="visgym", description=__doc__.splitlines()[0], epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"visgym {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    ev = sub.add_parser("eval", help="evaluate an agent on the evaluation splits",
                        epilog=EXIT_CODES)
    ev.add_argument("--agent", choices=["openai", "solver", "random", "replay"], default=None,
                    help="default: openai when --model is given, else solver")
    ev.add_argument("--model", default=None,
                    help="model name at the endpoint (default: none; needed by the openai agent)")
    ev.add_argument("--base-url", default=None,
                    help="OpenAI-compatible endpoint, e.g. a vLLM server "
                    "(default: $OPENAI_BASE_URL, else https://api.openai.com/v1)")
    ev.add_argument("--api-key-env", default="OPENAI_API_KEY",
                    help="name of the environment variable holding the API key")
    ev.add_argument("--split", choices=["easy", "hard", "all"], default="easy")
    ev.add_argument("--tasks", default=None,
                    help="comma-separated tasks, see 'visgym list' (default: all)")
    ev.add_argument("--episodes", type=int, default=None, help="episodes per task (default: 70)")
    ev.add_argument("--concurrency", type=int, default=8, help="episodes in flight per process")
    ev.add_argument("--processes", type=int, default=1,
                    help="runner processes sharing the episodes (for many cores)")
    ev.add_argument("--max-steps", type=int, default=None, help="default: 20 easy, 30 hard")
    _add_prompt_options(ev)
    _add_generation_options(ev)
    ev.add_argument("--full-size-frames", action="store_true",
                    help="draw frames at the task's own size and downscale them to the JPEG "
                    "size (default: tasks that can, the Fetch ones, draw at the JPEG size "
                    "with antialiasing)")
    ev.add_argument("--dataset-root", default=None, metavar="DIR",
                    help="the reference's published evaluation metadata: "
                    "DIR/test_set_<split>/<task>__<split>/*.jsonl and "
                    "DIR/initial_states_<split>/... (default: the shipped splits)")
    ev.add_argument("--replay", default=None,
                    help="JSON file of actions for --agent replay (default: none)")
    ev.add_argument("--seed", type=int, default=0, help="seed of the random agent")
    ev.add_argument("--resume", action="store_true",
                    help="continue the run in --out (same settings; finished episodes are kept)")
    ev.add_argument("--gifs", type=int, default=None, metavar="N",
                    help="GIFs of the first N episodes of each task and split only (default: all)")
    ev.add_argument("--no-gifs", action="store_true", help="no GIFs (same as --gifs 0)")
    ev.add_argument("--quiet", action="store_true", help="no progress line")
    ev.add_argument("--out", default=None, help="run directory (default: results/<model>_<split>)")
    ev.set_defaults(func=cmd_eval, argv=argv[1:])
    dm = sub.add_parser("demos", help="synthesize solver demonstrations for finetuning "
                        "(also: 'demos mix', 'demos export')")
    dm.add_argument("--tasks", default=None, help="comma-separated tasks (default: all)")
    dm.add_argument("--split", choices=["easy", "hard"], default="easy")
    dm.add_argument("--episodes", type=int, default=100,
                    help="conversations per task (unsuccessful rollouts are redrawn; growing it "
                    "in an existing --out adds the missing episodes)")
    dm.add_argument("--strategy", default=None, help="solver strategy, or 'mixed' to cycle all")
    dm.add_argument("--num-steps", default=None, help="LO,HI: padded plan lengths drawn per episode")
    dm.add_argument("--shard-size", type=int, default=100)
    dm.add_argument("--seed", type=int, default=0)
    dm.add_argument("--max-steps", type=int, default=None, help="default: 20 easy, 30 hard")
    dm.add_argument("--max-long-side", type=int, default=336)
    dm.add_argument("--full-size-frames", action="store_true",
                    help="draw frames at the task's own size and downscale them (default: "
                    "tasks that can draw at the image size with antialiasing)")
    dm.add_argument("--workers", type=int, default=None, help="processes (default: cores)")
    dm.add_argument("--ray", default=None, help="Ray address, 'auto', or 'local'")
    dm.add_argument("--exclude-dataset-root", action="append", default=None, metavar="DIR",
                    help="also exclude the init states of this published evaluation set (the "
                    "reference layout that 'eval --dataset-root' reads); repeatable")
    dm.add_argument("--quiet", action="store_true")
    dm.add_argument("--out", required=True)
    dm.set_defaults(func=cmd_demos)
    mx = sub.add_parser("demos-mix", help="mix demonstration datasets with exact counts")
    mx.add_argument("sources", nargs="+", help="demos output dirs or dataset folders")
    mx.add_argument("--weights", default=None, help="comma-separated, one per source dataset")
    mx.add_argument("--total", type=int, required=True)
    mx.add_argument("--seed", type=int, default=0)
    mx.add_argument("--out", required=True)
    mx.set_defaults(func=cmd_demos_mix)
    ex = sub.add_parser("demos-export", help="export a dataset as a Hugging Face dataset")
    ex.add_argument("dir")
    ex.add_argument("--dataset", default=None)
    ex.add_argument("--out", required=True)
    ex.set_defaults(func=cmd_demos_export)
    ro = sub.add_parser("rollouts", help="collect RL rollouts from an OpenAI-compatible "
                        "policy server: G per start, with token ids and log-probabilities "
                        "(also: 'rollouts export')", epilog=EXIT_CODES)
    ro.add_argument("--policy-url", "--base-url", dest="base_url", default=None,
                    help="the policy's OpenAI-compatible endpoint, e.g. a vLLM server "
                    "(default: $OPENAI_BASE_URL, else https://api.openai.com/v1)")
    ro.add_argument("--model", required=True, help="model name at the endpoint")
    ro.add_argument("--api-key-env", default="OPENAI_API_KEY",
                    help="name of the environment variable holding the API key")
    ro.add_argument("--tasks", default=None,
                    help="comma-separated tasks, see 'visgym list' (default: all)")
    ro.add_argument("--split", choices=["easy", "hard", "all"], default="easy",
                    help="difficulty preset")
    ro.add_argument("--episodes", type=int, default=8,
                    help="starts per task and split (growing it on --resume adds starts)")
    ro.add_argument("--group-size", type=int, default=8,
                    help="trajectories per start (a group shares the exact start state)")
    ro.add_argument("--seed", type=int, default=0, help="base of the start seeds")
    ro.add_argument("--reward", choices=["sparse", "progress"], default="sparse",
                    help="progress: potential-based shaping at every step (docs/rl.md)")
    ro.add_argument("--max-steps", type=int, default=None, help="default: 20 easy, 30 hard")
    ro.add_argument("--concurrency", type=int, default=64,
                    help="trajectories in flight (all processes together)")
    ro.add_argument("--processes", type=int, default=1,
                    help="collector processes sharing the trajectories (for many cores)")
    ro.add_argument("--ray", default=None, metavar="ADDRESS",
                    help="play the trajectories in Ray tasks ('auto', 'local' or a cluster "
                    "address; --processes of them at once); this process writes the records")
    ro.add_argument("--max-parse-errors", type=int, default=0, metavar="K",
                    help="end a trajectory at its K-th reply without a valid action (stop "
                    "reason parse_error; 0: never)")
    ro.add_argument("--require-logprobs", action="store_true",
                    help="refuse a server whose replies carry no log-probabilities (checked "
                    "at the pre-flight, and on every reply)")
    ro.add_argument("--no-logprobs", action="store_true",
                    help="leave \"logprobs\" and \"return_tokens_as_token_ids\" out of the "
                    "requests (a server that rejects them)")
    _add_prompt_options(ro, final_goal=False)
    _add_generation_options(ro, temperature=1.0)
    ro.add_argument("--full-size-frames", action="store_true",
                    help="draw frames at the task's own size and downscale them")
    ro.add_argument("--resume", action="store_true",
                    help="continue the run in --out (same settings; recorded trajectories are "
                    "kept)")
    ro.add_argument("--quiet", action="store_true", help="no progress line")
    ro.add_argument("--out", required=True, help="run folder")
    ro.set_defaults(func=cmd_rollouts, argv=argv[1:])
    rx = sub.add_parser("rollouts-export", help="write a rollouts folder as a Hugging Face "
                        "datasets Parquet file (images embedded)")
    rx.add_argument("dir", help="a 'visgym rollouts' --out folder")
    rx.add_argument("path", help="the Parquet file to write")
    rx.set_defaults(func=cmd_rollouts_export)
    sv = sub.add_parser("serve", help="serve tasks with the OpenEnv protocol (sessions batched "
                        "by a broker; needs visgym[openenv])", epilog=EXIT_CODES)
    sv.add_argument("--tasks", required=True,
                    help="comma-separated env ids (maze_2d/easy) or tasks (take --split)")
    sv.add_argument("--split", choices=["easy", "hard", "all"], default="easy")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8000, help="0: a free port (see --port-file)")
    sv.add_argument("--port-file", default=None,
                    help="write the port here once the server answers")
    sv.add_argument("--sessions", type=int, default=256,
                    help="concurrent sessions per worker (each task's batched env has this "
                    "many rows)")
    sv.add_argument("--workers", type=int, default=1,
                    help="server processes sharing the port, each with its own envs")
    sv.add_argument("--reward", choices=["sparse", "progress"], default="sparse")
    sv.add_argument("--gamma", type=float, default=1.0)
    sv.add_argument("--max-steps", type=int, default=None, help="default: 20 easy, 30 hard")
    sv.add_argument("--max-long-side", type=int, default=336,
                    help="fit the JPEG frames into this many pixels")
    sv.add_argument("--full-size-frames", action="store_true",
                    help="send frames at the task's own size")
    sv.add_argument("--window-ms", type=float, default=2.0,
                    help="how long the broker gathers session calls into one batch")
    sv.add_argument("--ray", default=None, metavar="ADDRESS",
                    help="run the batched envs in Ray actors ('auto', 'local' or an address)")
    sv.add_argument("--ray-actors", type=int, default=1,
                    help="actors per task (the sessions are spread over them)")
    sv.add_argument("--log-level", default="warning",
                    choices=["critical", "error", "warning", "info", "debug"])
    sv.set_defaults(func=cmd_serve)
    rep = sub.add_parser("report", help="rebuild summaries and HTML reports (DIR/report/); "
                         "compare several runs (comparison.md/.csv/.png/.html)")
    rep.add_argument("dirs", nargs="+", metavar="DIR", help="visgym eval run directories")
    rep.add_argument("--out", default=None, metavar="OUT", help="folder for the comparison "
                     "files (default: the folder holding the first DIR)")
    rep.add_argument("--no-html", action="store_true", help="no HTML reports")
    # main_report parses its own options: hand them on, the directories after a "--".
    rep.set_defaults(func=lambda a: cmd_report(argparse.Namespace(
        dirs=["--out", a.out] * (a.out is not None) + ["--no-html"] * a.no_html + ["--", *a.dirs])))
    gif = sub.add_parser("gifs", help="solve a few episodes of any env ids and write their GIFs "
                         "(a quick look at a family; no evaluation split needed)")
    gif.add_argument("--envs", default="maze_2d/easy,maze_2d/hard",
                     help="comma-separated env ids (see 'visgym list')")
    gif.add_argument("--episodes", type=int, default=4, help="episodes per env id")
    gif.add_argument("--seed", type=int, default=0, help="seed of the first episode")
    gif.add_argument("--out", default="results/gifs")
    gif.set_defaults(func=cmd_gifs)
    warm = sub.add_parser("warmup", help="compile (or load) every task's kernels now, the cold "
                          "ones in parallel ('make install' runs it; later runs start warm)")
    warm.add_argument("--tasks", default=None, help="comma-separated tasks (default: all)")
    warm.add_argument("--processes", type=int, default=None,
                      help="compiling processes (default: one per core)")
    warm.add_argument("--quiet", action="store_true")
    warm.set_defaults(func=cmd_warmup)
    lister = sub.add_parser("list", help="list the tasks (what --tasks takes) and their env ids")
    lister.add_argument("--ids", action="store_true",
                        help="only the registered env ids, one a line")
    lister.set_defaults(func=cmd_list)
    args = parser.parse_args(argv)
    if (getattr(args, "episodes", None) or 1) < 1:
        parser.error("--episodes must be at least 1")
    for env_id in getattr(args, "envs", "").split(",") if hasattr(args, "envs") else []:
        if env_id not in list_envs():
            parser.error(f"--envs: unknown env id {env_id!r} (see 'visgym list')")
    from . import agents
    from .evaluate import RunAborted

    preflight_error = getattr(agents, "PreflightError", ())
    try:
        return args.func(args)
    except preflight_error as error:
        print(f"visgym {args.command}: error: {error}", file=sys.stderr)
        return 2
    except RunAborted as error:
        print(f"visgym {args.command}: error: stopped: {error}; finished episodes are kept: "
              "fix the cause and rerun with --resume", file=sys.stderr)
        return 1
    except ValueError as error:
        print(f"visgym {args.command}: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        hint = ""
        out = getattr(args, "out_resolved", None)
        if args.command in ("eval", "rollouts") and out and \
                os.path.exists(os.path.join(out, "episodes.jsonl")):
            hint = "; finished episodes are kept: fix it and rerun with --resume"
        print(f"visgym {args.command}: error: {_os_error_text(error)}{hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\nvisgym {args.command}: interrupted; finished episodes are saved "
              "(rerun with --resume to continue)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
