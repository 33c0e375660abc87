"""``cudatrace configure PROGRAM --zluda DIR``: the ZLUDA runtime mapping the program needs, staged on request."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cudatrace.commands._common import common_parent, dump_json, output_width, use_color, write_output
from cudatrace.errors import EXIT_CONFIG, EXIT_OK, ConfigureError, UsageError

if TYPE_CHECKING:
    from cudatrace.configure.mapping import MappingPlan

CONFIGURE_SCHEMA = "cudatrace.configure/1"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``configure`` command."""
    p = sub.add_parser(
        "configure",
        parents=[common_parent()],
        help="plan (and with --apply stage) the ZLUDA files, AMD libraries and environment a program needs",
        description="Read the program's scan and run evidence (from the store, saved documents, or a scan made "
        "now) and plan exactly the ZLUDA mapping it needs: which ZLUDA file serves each CUDA library under the "
        "name the program asks for, the ROCm libraries behind it, the environment, what stays NVIDIA's own and "
        "what ZLUDA cannot serve. Dry run by default; --apply stages the files and a launcher beside the program "
        "(backing up anything it replaces), --restore undoes it byte for byte.",
    )
    p.add_argument("program", metavar="PROGRAM", help="the program (executable) to run under ZLUDA")
    p.add_argument("--zluda", metavar="DIR", help="the ZLUDA release folder (unzipped / untarred)")
    p.add_argument("--hip", metavar="DIR", help="the HIP SDK (Windows) or ROCm (Linux) folder, e.g. /opt/rocm")
    p.add_argument("--gpu", metavar="gfxNNNN", help="the AMD GPU architecture, e.g. gfx1100 (see cudatrace doctor)")
    p.add_argument("--release", metavar="R", help="the ZLUDA release the folder holds, when its files fit several")
    p.add_argument("--device", metavar="N", help="run on this AMD GPU only (HIP_VISIBLE_DEVICES)")
    p.add_argument(
        "--method",
        choices=("ld_library_path", "ld_audit"),
        help="Linux: load ZLUDA through LD_LIBRARY_PATH (default, as ZLUDA documents) or the zluda_ld LD_AUDIT "
        "module (also wins over RPATH)",
    )
    p.add_argument(
        "--evidence",
        metavar="FILE",
        action="append",
        default=[],
        help="a saved scan or run document (JSON) to plan from instead of the store; repeatable",
    )
    p.add_argument("--mapping", metavar="FILE", help="use this (edited) mapping file instead of planning a new one")
    p.add_argument("--apply", action="store_true", help="stage the files and the launcher (default: dry run)")
    p.add_argument("--symlink", action="store_true", help="with --apply: link ZLUDA's files instead of copying")
    p.add_argument("--restore", action="store_true", help="undo a previous --apply, proving every byte by hash")
    p.add_argument(
        "--force",
        action="store_true",
        help="with --restore: go on when files changed since --apply, keeping a copy of them beside the program",
    )
    p.add_argument("--format", choices=("terminal", "json", "toml"), default="terminal", help="stdout format")
    p.add_argument("-o", "--output", metavar="MAPPING.toml", help="also write the mapping (TOML) to this file")
    p.set_defaults(handler=run_configure)


def run_configure(args: argparse.Namespace) -> int:
    """Plan, render, and stage or restore; return the exit code."""
    from cudatrace.configure.launcher import render_launcher
    from cudatrace.configure.render import render_plan_terminal, render_stage_terminal
    from cudatrace.configure.stage import apply_plan, restore

    color = use_color(args) and args.format == "terminal"
    width = output_width(args)
    if args.restore:
        if args.apply:
            raise UsageError("--apply and --restore exclude each other")
        report = restore(args.program, force=args.force)
        if args.format == "json":
            text = dump_json({"schema": CONFIGURE_SCHEMA, "restored": report.to_dict()})
        else:
            text = render_stage_terminal(report, restored=True, color=color, width=width)
        write_output(text, None)
        return EXIT_OK
    plan = _plan(args)
    launcher = render_launcher(plan)
    from cudatrace.configure.mapping import plan_to_toml

    if args.output:
        write_output(plan_to_toml(plan), args.output)
    missing_amd = plan.missing_amd()
    if args.apply:
        if missing_amd:
            names = ", ".join(a.name for a in missing_amd)
            raise ConfigureError(f"the HIP SDK lacks {names} that the program's ZLUDA libraries need", plan.hip_dir)
        report = apply_plan(plan, symlink=args.symlink)
        if args.format == "json":
            doc: dict[str, Any] = {
                "schema": CONFIGURE_SCHEMA,
                "mapping": plan.to_dict(),
                "launcher": launcher,
                "applied": report.to_dict(),
            }
            text = dump_json(doc)
        elif args.format == "toml":
            text = plan_to_toml(plan)
        else:
            text = render_plan_terminal(plan, launcher, color=color, applied=True, width=width)
            text += render_stage_terminal(report, restored=False, color=color, width=width)
        write_output(text, None)
        return EXIT_OK
    if args.format == "json":
        text = dump_json({"schema": CONFIGURE_SCHEMA, "mapping": plan.to_dict(), "launcher": launcher, "applied": None})
    elif args.format == "toml":
        text = plan_to_toml(plan)
    else:
        text = render_plan_terminal(plan, launcher, color=color, width=width)
    write_output(text, None)
    if missing_amd:
        names = ", ".join(a.name for a in missing_amd)
        print(f"cudatrace: warning: {plan.hip_dir}: the HIP SDK lacks {names}", file=sys.stderr)
        return EXIT_CONFIG
    return EXIT_OK


def _plan(args: argparse.Namespace) -> MappingPlan:
    from cudatrace.configure.layout import detect_hip, detect_zluda
    from cudatrace.configure.mapping import Method, check_plan, plan_mapping, read_mapping, refresh_presence

    program = Path(args.program)
    if args.mapping:
        plan = read_mapping(args.mapping)
        if Path(plan.program).resolve() != program.resolve():
            raise ConfigureError(f"the mapping is for {plan.program}, not {program}", args.mapping)
        if args.zluda:
            from dataclasses import replace

            plan = replace(plan, zluda_dir=str(Path(args.zluda)))
        zluda = detect_zluda(plan.zluda_dir)
        if not zluda.contains(plan.release):
            raise ConfigureError(f"ZLUDA folder holds release {zluda.release_range}, not {plan.release}", zluda.path)
        plan = refresh_presence(plan, zluda)
        check_plan(plan)
        return plan
    if not args.zluda:
        raise UsageError("configure needs --zluda DIR (or --mapping FILE, or --restore)")
    from cudatrace.configure.evidence import evidence_of
    from cudatrace.programs.evidence import gather_documents, platform_of

    platform_of(program)  # a missing or non-binary program fails before any folder is read
    zluda = detect_zluda(args.zluda)
    hip = detect_hip(args.hip) if args.hip else None
    evidence = evidence_of(gather_documents(program, documents=args.evidence, db=args.db, use_store=not args.no_store))
    gpu = None
    if args.gpu:
        from cudatrace.configure.gpu import normalize_gfx

        gpu = normalize_gfx(args.gpu)
        if gpu is None:
            raise UsageError(f"--gpu wants an architecture such as gfx1100, not {args.gpu!r}")
    gpu_note = None
    if gpu is None and evidence.platform == "linux" and sys.platform.startswith("linux"):
        from cudatrace.configure.gpu import read_kfd_topology

        found = read_kfd_topology()  # this machine's GPUs, read from sysfs without running anything
        if found:
            gpu = found[0].gfx
            gpu_note = f"GPU {gpu} found in this machine's KFD topology (pass --gpu to plan for another)"
    release = None
    if args.release is not None:
        from cudatrace.programs.releases import resolve_release

        release = resolve_release(args.release, allow_newer=False).name  # the folder must hold it: no newer one
    plan = plan_mapping(
        evidence,
        zluda,
        hip,
        gpu=gpu,
        release=release,
        method=Method(args.method) if args.method else None,
        device=args.device,
    )
    if gpu_note:
        from dataclasses import replace

        plan = replace(plan, notes=(*plan.notes, gpu_note))
    check_plan(plan)
    return plan
