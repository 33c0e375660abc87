"""``cudatrace doctor``: check the AMD runtime, the GPU, a ZLUDA folder, and what a program misses."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from cudatrace.commands._common import (
    add_output_args,
    common_parent,
    dump_json,
    output_width,
    use_color,
    write_output,
)
from cudatrace.errors import EXIT_CONFIG, EXIT_OK, InputError

MAX_CAPTURE = 1 << 20  # captured tool output larger than this is not rocminfo / hipInfo output


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``doctor`` command."""
    p = sub.add_parser(
        "doctor",
        parents=[common_parent()],
        help="is the AMD runtime present and of one generation, which GPU, which ZLUDA release, what is missing",
        description="Check that one HIP runtime generation is on the search path (two in one process crash it), "
        "which AMD GPU architecture is present (rocminfo / hipInfo, the KFD topology, or a marketing name), which "
        "ZLUDA release a folder holds, and what is missing for PROGRAM. Exit code 7 when a problem is found.",
    )
    p.add_argument("program", metavar="PROGRAM", nargs="?", help="check what this program misses (needs --zluda)")
    p.add_argument("--zluda", metavar="DIR", help="a ZLUDA release folder")
    p.add_argument("--hip", metavar="DIR", help="the HIP SDK (Windows) or ROCm (Linux) folder")
    p.add_argument("--gpu", metavar="gfxNNNN", help="the GPU architecture, when known")
    p.add_argument("--gpu-name", metavar="NAME", help='a marketing name, e.g. "Radeon RX 7900 XTX"')
    p.add_argument(
        "--rocminfo",
        metavar="FILE",
        default=os.environ.get("CUDATRACE_ROCMINFO"),
        help="captured rocminfo output to read instead of running rocminfo (default: $CUDATRACE_ROCMINFO)",
    )
    p.add_argument(
        "--hipinfo",
        metavar="FILE",
        default=os.environ.get("CUDATRACE_HIPINFO"),
        help="captured hipInfo output (default: $CUDATRACE_HIPINFO)",
    )
    p.add_argument("--no-tools", action="store_true", help="do not run rocminfo / hipInfo")
    p.add_argument("--evidence", metavar="FILE", action="append", default=[], help="saved scan/run documents")
    add_output_args(p)
    p.set_defaults(handler=run_doctor)


def _read_capture(path: str | None) -> str | None:
    if not path:
        return None
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = fh.read(MAX_CAPTURE + 1)
    except FileNotFoundError:
        raise InputError("captured tool output does not exist", path) from None
    except OSError as exc:
        raise InputError(f"captured tool output is not readable: {exc.strerror or exc}", path) from None
    if len(data) > MAX_CAPTURE:
        raise InputError(f"captured tool output is larger than {MAX_CAPTURE} bytes", path)
    return data.decode("utf-8", "replace")


def run_doctor(args: argparse.Namespace) -> int:
    """Diagnose, render, write; exit 7 when a problem was found."""
    from cudatrace.configure.doctor import diagnose
    from cudatrace.configure.gpu import normalize_gfx

    evidence = None
    if args.program:
        from cudatrace.configure.evidence import evidence_of
        from cudatrace.programs.evidence import gather_documents

        documents = gather_documents(args.program, documents=args.evidence, db=args.db, use_store=not args.no_store)
        evidence = evidence_of(documents)
    report = diagnose(
        zluda_dir=args.zluda,
        hip_dir=args.hip,
        evidence=evidence,
        rocminfo_text=_read_capture(args.rocminfo),
        hipinfo_text=_read_capture(args.hipinfo),
        gpu_name=args.gpu_name,
        gpu=normalize_gfx(args.gpu) if args.gpu else None,
        run_tools=not args.no_tools,
    )
    if args.format == "json":
        text = dump_json(report.to_dict())
    else:
        from cudatrace.configure.render import render_doctor_terminal

        text = render_doctor_terminal(report, color=use_color(args), width=output_width(args))
    write_output(text, args.output)
    return EXIT_CONFIG if report.problems else EXIT_OK
