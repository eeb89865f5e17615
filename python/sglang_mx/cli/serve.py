"""`sglang-mx serve`: plain `python -m sglang.launch_server` with the sglang_mx plugin active.

Defaults to the bundled MXFP4 model on 127.0.0.1:30000; every other argument is passed to SGLang
unchanged, so on a GPU node `sglang-mx serve --model-path amd/GLM-5.2-MXFP4 --tp 8 ...` is
SGLang plus our plugin. `--restart on-failure` keeps it running: the server is restarted (with
backoff) whenever its process tree exits other than cleanly.
"""

from __future__ import annotations

import argparse
import os
import sys

# GLM-5's MTP as SGLang serves it: EAGLE over the checkpoint's NextN layer, one draft token per
# step (topk 1); the sglang_mx CPU platform and mx_dsa serve one draft step.
MTP_ARGS = (
    "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "1",
    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2",
)  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve",
        help="launch an SGLang server with the sglang_mx plugin (default: bundled MXFP4 model)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Any other option is an SGLang server argument, e.g. --tp 8, --mem-fraction-static "
        "0.8, --attention-backend mx_triton. See `python -m sglang.launch_server --help`.",
    )
    p.add_argument("--model-path", default=None, help="HF model dir or id (default: bundled MXFP4)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument(
        "--no-cache-report",
        action="store_true",
        help="do not pass --enable-cache-report (cached tokens in usage)",
    )
    p.add_argument(
        "--restart",
        choices=("no", "on-failure"),
        default="no",
        help="on-failure: supervise the server and restart it (with backoff) whenever its "
        "process tree exits other than cleanly; each restart logs the exit code or signal",
    )
    p.add_argument(
        "--restart-backoff-s", type=float, default=1.0, help="first restart delay (doubles)"
    )
    p.add_argument(
        "--max-restarts", type=int, default=None, help="give up after this many (default: never)"
    )
    p.add_argument(
        "--mtp",
        action="store_true",
        help="MTP speculative decoding with the model's NextN layer as draft (SGLang's EAGLE: "
        + " ".join(MTP_ARGS)
        + ")",
    )
    p.add_argument("--dry-run", action="store_true", help="print the SGLang command and exit")
    p.set_defaults(func=run, passthrough=True)


def build_command(args: argparse.Namespace) -> list[str]:
    model = args.model_path
    if model is None:
        from sglang_mx.assets import bundled_model_path

        model = bundled_model_path("glm5-quark")
    cmd = [
        sys.executable,
        "-m",
        "sglang.launch_server",
        "--model-path",
        model,
        "--host",
        args.host,
        "--port",
        str(args.port),
    ]
    extra = list(args.extra)
    if getattr(args, "mtp", False):
        extra = [*MTP_ARGS, *extra]
    if not args.no_cache_report and "--enable-cache-report" not in extra:
        cmd.append("--enable-cache-report")
    return cmd + extra


def _cpu_rank_refusal(cmd: list[str]) -> str | None:
    """On a box without a GPU, the one-line reason a launch cannot bind a core per rank (more
    ranks than usable cores and no SGLANG_CPU_OMP_THREADS_BIND), else None. With cores to spare
    the CPU platform sets the variable itself (seam/cpu_binding.py)."""
    from sglang_mx.env import ENV
    from sglang_mx.seam import cpu_binding

    if os.environ.get(cpu_binding.BIND_ENV) or not ENV.platform_wanted():
        return None
    try:
        cpu_binding.bind_groups(cpu_binding.ranks_from_cli(cmd), os.sched_getaffinity(0))
    except cpu_binding.CpuBindingError as e:
        return str(e)
    return None


def _cpu_allocator() -> tuple[dict[str, str], str] | None:
    """On a box without a GPU, the environment that gives the server its allocator
    (seam/cpu_malloc.py) and its one-line account; None on a GPU node."""
    from sglang_mx.env import ENV
    from sglang_mx.seam.cpu_malloc import malloc_env

    if not ENV.platform_wanted():
        return None
    return malloc_env(ENV.malloc, os.environ)


def run(args: argparse.Namespace) -> int:
    cmd = build_command(args)
    try:
        allocator = _cpu_allocator()
    except ValueError as e:
        print(f"sglang-mx serve: {e}", file=sys.stderr, flush=True)
        return 2
    if args.dry_run:
        if allocator:
            print(f"sglang-mx: CPU allocator: {allocator[1]}", file=sys.stderr)
        print(" ".join(cmd))
        return 0
    # Offline by design: models come from local files, never a hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    refusal = _cpu_rank_refusal(cmd)
    if refusal:
        print(f"sglang-mx serve: {refusal}", file=sys.stderr, flush=True)
        return 2
    if allocator:
        os.environ.update(allocator[0])
        print(f"sglang-mx: CPU allocator: {allocator[1]}", flush=True)
    print(
        f"sglang-mx: serving {cmd[cmd.index('--model-path') + 1]} on http://{args.host}:{args.port}",
        flush=True,
    )
    if args.restart == "on-failure":
        from sglang_mx.supervisor import RestartPolicy, supervise

        policy = RestartPolicy(backoff_s=args.restart_backoff_s, max_restarts=args.max_restarts)
        return supervise(cmd, policy)
    os.execv(cmd[0], cmd)
    return 0  # not reached
