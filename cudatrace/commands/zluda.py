"""``cudatrace zluda releases|show|coverage``: browse the ZLUDA coverage catalog."""

from __future__ import annotations

import argparse
from typing import Any

from cudatrace.commands._common import (
    add_output_args,
    common_parent,
    dump_json,
    render_options,
    write_output,
)
from cudatrace.errors import EXIT_OK, CatalogError
from cudatrace.model import Family
from cudatrace.reports.render import formats_for, render
from cudatrace.reports.zluda_terminal import CoverageDocument, ReleasesDocument, ShowDocument


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``zluda`` command and its sub-commands."""
    p = sub.add_parser(
        "zluda",
        help="what each ZLUDA release does with CUDA entry points (releases, one entry point's history, coverage)",
        description="Browse the ZLUDA coverage catalog built from ZLUDA's git history.",
    )
    zsub = p.add_subparsers(dest="zluda_command", metavar="SUBCOMMAND", required=True)

    r = zsub.add_parser("releases", parents=[common_parent()], help="list releases with implemented counts")
    r.add_argument("--all", action="store_true", help="include the Intel Level Zero releases v1 and v2")
    add_output_args(r, formats_for(ReleasesDocument))
    r.set_defaults(handler=run_releases)

    s = zsub.add_parser("show", parents=[common_parent()], help="one entry point's status across releases")
    s.add_argument("function", metavar="ENTRY_POINT", help="e.g. cublasSgemm_v2, cuMemAlloc_v2, cudnnCreate")
    s.add_argument("--family", choices=[f.value for f in Family], help="limit to one library family")
    s.add_argument("--release", metavar="R", help="also say what this release does with it (default: the newest)")
    add_output_args(s, formats_for(ShowDocument))
    s.set_defaults(handler=run_show)

    c = zsub.add_parser("coverage", parents=[common_parent()], help="per-library counts for one release")
    c.add_argument("--family", choices=[f.value for f in Family], help="limit to one library family")
    c.add_argument("--release", metavar="R", help="ZLUDA release (default: the newest), e.g. v6-preview.69")
    add_output_args(c, formats_for(CoverageDocument))
    c.set_defaults(handler=run_coverage)


def _line_label(line: str) -> str:
    return {"amd": "mainline", "intel": "Intel era"}.get(line, "side branch")


def releases_document(include_intel: bool = False) -> dict[str, Any]:
    """The ``zluda releases`` JSON document."""
    from cudatrace.coverage_db.catalog import load_catalog

    cat = load_catalog()
    rows = []
    for name in cat.releases(include_intel=include_intel):
        rel = cat.release(name)
        rows.append(
            {
                "release": rel.name,
                "date": rel.date[:10],
                "commit": rel.commit,
                "backend": rel.backend,
                "line": _line_label(rel.line),
                "coverage": [c.to_dict() for c in cat.coverage(name)],
            }
        )
    return {
        "schema": "cudatrace.zluda-releases/1",
        "latest": cat.latest,
        "intel_releases": list(cat.intel_releases()),
        "releases": rows,
    }


def run_releases(args: argparse.Namespace) -> int:
    """Handler of ``zluda releases``."""
    doc = releases_document(args.all)
    text = render(ReleasesDocument(doc), args.format, render_options(args))
    write_output(text, args.output)
    return EXIT_OK


def show_document(function: str, family: str | None = None, release: str | None = None) -> dict[str, Any]:
    """The ``zluda show`` JSON document: every status run of one entry point, and its status in one release."""
    from cudatrace.coverage_db.catalog import load_catalog

    cat = load_catalog()
    rel = cat.resolve_release(release)
    fam = Family(family) if family else None
    runs = cat.history(function, fam)
    name = runs[0].function if runs else function
    status = {
        lib: cat.classify(runs_fam, name, rel, library_key=lib).to_dict()
        for lib, runs_fam in {r.library: r.family for r in runs}.items()
    }
    api = cat.api_name(name)
    return {
        "schema": "cudatrace.zluda-show/1",
        "function": name,
        "asked": function,
        "api_name": api if api != name else None,
        "release": rel,
        "status": status,
        "runs": [r.to_dict() for r in runs],
    }


def run_show(args: argparse.Namespace) -> int:
    """Handler of ``zluda show``."""
    from cudatrace.coverage_db.catalog import NvidiaOwnedError

    try:
        doc = show_document(args.function, args.family, args.release)
    except NvidiaOwnedError as exc:
        # A function ZLUDA leaves to NVIDIA's own library (cudaMalloc): that is the answer, not a usage error.
        note = str(exc)
        owned = {"schema": "cudatrace.zluda-show/1", "function": args.function, "asked": args.function}
        owned.update({"api_name": None, "release": None, "status": None, "runs": [], "note": note})
        write_output(dump_json(owned) if args.format == "json" else note + "\n", args.output)
        return EXIT_OK
    text = render(ShowDocument(doc), args.format, render_options(args))
    write_output(text, args.output)
    return EXIT_OK


def coverage_document(release: str | None, family: str | None = None) -> dict[str, Any]:
    """The ``zluda coverage`` JSON document."""
    from cudatrace.coverage_db.catalog import load_catalog

    cat = load_catalog()
    rel = cat.resolve_release(release)
    fam = Family(family) if family else None
    rows = cat.coverage(rel, fam)
    if not rows:
        raise CatalogError(f"ZLUDA {rel} has no {family} library")
    return {
        "schema": "cudatrace.zluda-coverage/1",
        "release": rel,
        "family": family,
        "libraries": [c.to_dict() for c in rows],
    }


def run_coverage(args: argparse.Namespace) -> int:
    """Handler of ``zluda coverage``."""
    doc = coverage_document(args.release, args.family)
    text = render(CoverageDocument(doc), args.format, render_options(args))
    write_output(text, args.output)
    return EXIT_OK
