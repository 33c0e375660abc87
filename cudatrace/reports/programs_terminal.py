"""The program roll-up that heads the terminal scan output: one block per program, NVIDIA's libraries last.

Per program: its name, version, kind and root; the verdict with its top reasons and remedies, and the first
release that fixes it; the start-up parts and the on-demand parts with the feature each serves and its own
status; libraries it loads that nothing ships. Every string from a file goes through
:func:`~cudatrace.reports.document.printable` into a :class:`rich.text.Text`, never markup.
"""

from __future__ import annotations

from rich.text import Text

from cudatrace.libraries import identify_library
from cudatrace.model import PartRole, Program, ProgramPart, ScanResult, Severity, VerdictStatus
from cudatrace.reports.document import printable
from cudatrace.reports.labels import VERDICT_LABELS
from cudatrace.wording import counted, file_names, python_builds

MAX_REASONS = 3
_OWN_LINES = ("release_fixing", "rocm_build")  # reasons shown on a line of their own, below the others
MAX_PARTS = 8
MAX_MISSING = 4  # more missing libraries are listed on one line


def _t(text: object, style: str = "") -> Text:
    return Text(printable(str(text)), style=style)


def _name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _part_name(part: ProgramPart, names: dict[str, str]) -> str:
    """The part's file name (``names``: where two parts share one, with the folders that tell them apart), and
    the names of its copies (the same file under other names)."""
    name = names.get(part.path) or _name(part.path)
    if not part.copies:
        return name
    return f"{name} (also {', '.join(_name(c) for c in part.copies)})"


def program_lines(program: Program, quiet: bool = False, all_reasons: bool = False) -> list[Text]:
    """The lines of one program's block; ``quiet``: its verdict and the reasons that make it, nothing else;
    ``all_reasons`` (``-v``): every reason of the verdict, else the first :data:`MAX_REASONS`."""
    version = f" {program.version}" if program.version else ""
    head = _t(f"{program.name}{version}", "bold")
    head.append_text(_t(f"  ({program.kind.value}, {program.platform or '?'}, {program.root})", "dim"))
    lines = [head]
    if program.is_nvidia:
        lines.append(
            _t(
                f"  NVIDIA's own CUDA libraries ({len(program.parts)}): judged through the programs that load "
                "them, not as a program",
                "dim",
            )
        )
        return lines
    v = program.verdict
    if v is not None:
        line = Text("  verdict ")
        line.append_text(_t(f"(ZLUDA {v.release}): "))
        label = VERDICT_LABELS[v.status]
        line.append_text(_t(label.shout, label.style))
        lines.append(line)
        shown = [r for r in v.reasons if r.code not in _OWN_LINES]
        if quiet:
            shown = [r for r in shown if r.severity is not Severity.INFO]
        elif not all_reasons:
            shown = shown[:MAX_REASONS]
        for r in shown:
            lines.append(_t(f"    - [{r.severity.value}] {r.message}"))
            if r.remedy:
                lines.append(_t(f"      remedy: {r.remedy}", "dim"))
        rest = len([r for r in v.reasons if r.code not in _OWN_LINES]) - len(shown)
        if quiet:
            return lines
        if rest > 0:
            lines.append(_t(f"    ... and {counted(rest, 'more reason')} (-v lists them all)", "dim"))
        fixing = next((r for r in v.reasons if r.code == "release_fixing"), None)
        if fixing is not None:
            lines.append(_t(f"    release: {fixing.message}", "cyan"))
        rocm = next((r for r in v.reasons if r.code == "rocm_build"), None)
        if rocm is not None:
            lines.append(_t(f"    ROCm: {rocm.message}", "green"))
    startup = [p for p in program.parts if p.role is PartRole.STARTUP]
    shown_parts = [*startup[:MAX_PARTS], *program.on_demand[:MAX_PARTS]]
    shown_parts += [p for p in program.parts if p.role is PartRole.NVIDIA][:MAX_PARTS]
    part_names = file_names([p.path for p in shown_parts])
    if startup:
        names = ", ".join(python_builds([_part_name(p, part_names) for p in startup[:MAX_PARTS]]))
        more = f" and {len(startup) - MAX_PARTS} more" if len(startup) > MAX_PARTS else ""
        lines.append(_t(f"  start-up: {names}{more}"))
    for p in program.on_demand[:MAX_PARTS]:
        status = f" [{p.status.value.replace('_', ' ')}]" if p.status else ""
        what = f"{p.feature}; {p.why}" if p.feature else p.why
        lines.append(_t(f"  on demand: {_part_name(p, part_names)} ({what}){status}"))
    if len(program.on_demand) > MAX_PARTS:
        lines.append(_t(f"  ... and {len(program.on_demand) - MAX_PARTS} more on-demand parts", "dim"))
    nvidia = [p for p in program.parts if p.role is PartRole.NVIDIA]
    if nvidia:
        lines.append(
            _t(f"  NVIDIA libraries shipped: {', '.join(_part_name(p, part_names) for p in nvidia[:MAX_PARTS])}", "dim")
        )
    # A library wanted two ways (linked by one part, loaded by name by another) is one missing library.
    ways: dict[str, list[str]] = {}
    for m in program.missing:
        ways.setdefault(m.name, []).append(f"wanted by {', '.join(m.wanted_by[:3])}, {m.how.replace('_', ' ')}")
    if len(ways) > MAX_MISSING:
        # the versions of one library named apart are one library: "libnvrtc.so or libnvrtc.so.13" (CuPy)
        libraries: dict[str, list[str]] = {}
        for name in ways:
            lib = identify_library(name)
            libraries.setdefault(lib.stem if lib is not None else name.lower(), []).append(name)
        listed = ", ".join(" or ".join(names) for names in libraries.values())
        lines.append(_t(f"  missing ({len(libraries)}): {listed}", "yellow"))
        return lines
    for name, wanted in ways.items():
        lines.append(_t(f"  missing: {name} ({'; '.join(wanted)})", "yellow"))
    return lines


def rollup_lines(result: ScanResult, quiet: bool = False, all_reasons: bool = False) -> list[Text]:
    """Every program's block, then one summary line; empty when the scan has no programs. ``quiet``: the
    programs that do not simply run, each with its verdict and the reasons that make it, then the summary;
    ``all_reasons``: every reason of each verdict."""
    if not result.programs:
        return []
    out: list[Text] = []
    for program in result.programs:
        if quiet and (program.is_nvidia or program.verdict is None or program.verdict.status is VerdictStatus.RUNS):
            continue
        out.extend(program_lines(program, quiet, all_reasons))
        out.append(Text(""))
    real = [p for p in result.programs if not p.is_nvidia]
    counts: dict[str, int] = {}
    for p in real:
        key = VERDICT_LABELS[p.verdict.status].word if p.verdict else "not judged"
        counts[key] = counts.get(key, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    nvidia = len(result.programs) - len(real)
    tail = f"; {counted(nvidia, 'NVIDIA library package')} not counted" if nvidia else ""
    out.append(_t(f"{counted(len(real), 'program')}: {summary or 'none'}{tail}", "bold"))
    if not quiet:
        out.append(_t("binaries:", "bold"))
        out.append(Text(""))
    return out
