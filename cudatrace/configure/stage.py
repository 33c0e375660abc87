"""Stage a mapping (``configure --apply``) and undo it (``configure --restore``), proving every byte by hash.

``apply_plan`` builds the staging folder ``<program>.zluda`` in a temporary folder beside the program (ZLUDA
files under the requested names, the launcher tools, backups, a manifest with sha256 hashes) and renames it into
place in one step. Files that must sit beside the program (the launcher script, Windows DLLs that zluda.exe
does not redirect) are written afterwards; an existing file there is backed up first. Any failure rolls back
what was done, so a folder is either fully configured or untouched.

``restore`` puts every backed-up file back, removes every file it added and the staging folder, and checks each
restored file's sha256 against the manifest.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudatrace.codec import Record
from cudatrace.configure.launcher import render_launcher
from cudatrace.configure.mapping import MappingPlan, Placement, check_plan, plan_to_toml
from cudatrace.digest import sha256_of
from cudatrace.errors import ConfigureError

MANIFEST_SCHEMA = "cudatrace.stage/1"
MANIFEST_NAME = "manifest.json"
MAPPING_NAME = "mapping.toml"  # the staged plan: ``cudatrace run --zluda`` reads it back
BACKUP_DIR = "backup"
MAX_MANIFEST_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class FileProof(Record):
    """One file of a stage or restore: where, the hash it must have, the hash it has."""

    path: str
    action: str  # "staged", "added", "replaced", "restored", "removed"
    expected_sha256: str | None
    actual_sha256: str | None

    json_extra = ("ok",)

    @property
    def ok(self) -> bool:
        """True when the file has the hash it must have (or is gone when it must be)."""
        return self.expected_sha256 == self.actual_sha256


@dataclass(frozen=True, slots=True)
class StageReport(Record):
    """What ``--apply`` or ``--restore`` did, file by file."""

    program: str
    staging_dir: str
    launcher: str | None
    files: tuple[FileProof, ...]

    json_order = ("program", "staging_dir", "launcher", "ok")

    @property
    def ok(self) -> bool:
        """True when every file proof holds."""
        return all(f.ok for f in self.files)


def staging_dir_of(program: str | os.PathLike[str]) -> Path:
    """The staging folder of a program: ``<program>.zluda`` beside it."""
    p = Path(program)
    return p.parent / f"{p.name}.zluda"


def _err(message: str, path: Path | str, exc: OSError | None = None) -> ConfigureError:
    detail = f": {exc.strerror or exc}" if exc is not None else ""
    return ConfigureError(f"{message}{detail}", str(path))


def _copy(src: Path, dst: Path, *, symlink: bool) -> None:
    if symlink:
        os.symlink(src.resolve(), dst)
    else:
        shutil.copyfile(src, dst)
        shutil.copymode(src, dst)


def apply_plan(plan: MappingPlan, *, symlink: bool = False) -> StageReport:
    """Stage the mapping beside the program; ConfigureError and no change at all when anything fails."""
    check_plan(plan)
    program = Path(plan.program)
    folder = program.parent
    staging = plan.staging_dir
    zdir = Path(plan.zluda_dir)
    if not program.is_file():
        raise ConfigureError("program does not exist", str(program))
    if staging.exists() or staging.is_symlink():
        raise ConfigureError("already configured (run configure --restore first)", str(staging))
    leftovers = clean_leftovers(program)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{plan.staging}.tmp-", dir=folder))
        # mkdtemp makes it 0700: other users running the program must be able to load the staged libraries.
        tmp.chmod(0o777 & ~_umask())
    except OSError as exc:
        raise _err("cannot write in the program folder", folder, exc) from None
    proofs: list[FileProof] = []
    staged: list[tuple[str, str]] = []  # (name in the staging folder, sha256 of the ZLUDA file)
    beside: list[tuple[Path, bytes | Path]] = []  # (target, new content or source file)
    try:
        for m in plan.libraries:
            src = zdir / m.source
            if m.placement is Placement.RUNTIME_DIR:
                try:
                    _copy(src, tmp / m.requested, symlink=symlink)
                except OSError as exc:
                    raise _err(f"cannot stage {m.source}", src, exc) from None
                staged.append((m.requested, sha256_of(src)))
            else:
                beside.append((folder / m.requested, src))
        for name in plan.launcher_files:
            src = zdir / name
            try:
                _copy(src, tmp / name, symlink=symlink)
            except OSError as exc:
                raise _err(f"cannot stage {name}", src, exc) from None
            staged.append((name, sha256_of(src)))
        launcher_path = folder / plan.launcher_name
        beside.append((launcher_path, render_launcher(plan).encode("utf-8")))
        manifest: dict[str, Any] = {
            "schema": MANIFEST_SCHEMA,
            "program": str(program),
            "staging": plan.staging,
            "release": plan.release,
            "staged": [{"name": name, "sha256": digest} for name, digest in staged],
            "added": [],
            "replaced": [],
        }
        (tmp / BACKUP_DIR).mkdir()
        for target, content in beside:
            if target.is_symlink():
                raise ConfigureError(
                    "a symbolic link is in the way of a file to stage: replace or remove it", str(target)
                )
            if target.is_dir():
                raise ConfigureError("a folder is in the way of a file to stage", str(target))
            new_hash = _hash_content(content)
            if target.exists() or target.is_symlink():
                backup = tmp / BACKUP_DIR / target.name
                try:
                    shutil.copy2(target, backup, follow_symlinks=False)
                except OSError as exc:
                    raise _err("cannot back up", target, exc) from None
                before = sha256_of(target)
                if sha256_of(backup) != before:
                    raise ConfigureError("backup does not match the original", str(target))
                manifest["replaced"].append({"name": target.name, "sha256_before": before, "sha256_after": new_hash})
            else:
                manifest["added"].append({"name": target.name, "sha256": new_hash})
        _write_json(tmp / MANIFEST_NAME, manifest)
        (tmp / MAPPING_NAME).write_text(plan_to_toml(plan), encoding="utf-8")
        try:
            os.rename(tmp, staging)
        except OSError as exc:
            raise _err("cannot create the staging folder", staging, exc) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # the staged copies, read back from their final place
    proofs.extend(
        FileProof(str(staging / name), "staged", digest, sha256_of(staging / name)) for name, digest in staged
    )
    done: list[Path] = []
    try:
        for target, content in beside:
            _place(target, content)
            done.append(target)
            proofs.append(
                FileProof(
                    str(target),
                    "replaced" if (staging / BACKUP_DIR / target.name).exists() else "added",
                    _hash_content(content),
                    sha256_of(target),
                )
            )
    except BaseException as exc:
        _rollback(staging, folder, done)
        if isinstance(exc, OSError):
            raise _err("cannot place a file beside the program; nothing changed", folder, exc) from None
        raise
    return StageReport(str(program), str(staging), str(folder / plan.launcher_name), (*leftovers, *tuple(proofs)))


def _hash_content(content: bytes | Path) -> str:
    if isinstance(content, Path):
        return sha256_of(content)
    import hashlib

    return hashlib.sha256(content).hexdigest()


def _place(target: Path, content: bytes | Path) -> None:
    tmp = target.parent / f".{target.name}.cudatrace-tmp"
    if isinstance(content, Path):
        shutil.copyfile(content, tmp)
    else:
        tmp.write_bytes(content)
        if target.suffix == ".sh":
            tmp.chmod(0o755)
    os.replace(tmp, target)


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _rollback(staging: Path, folder: Path, done: list[Path]) -> None:
    """Undo a partly placed stage: put backups back, remove what was added, remove the staging folder."""
    for target in reversed(done):
        backup = staging / BACKUP_DIR / target.name
        try:
            if backup.exists() or backup.is_symlink():
                _restore_one(backup, target)
            else:
                target.unlink(missing_ok=True)
        except OSError:
            pass  # keep undoing the rest; the backup stays in the staging folder if this one failed
    for leftover in folder.glob(".*.cudatrace-tmp"):
        leftover.unlink(missing_ok=True)
    shutil.rmtree(staging, ignore_errors=True)


def _restore_one(backup: Path, target: Path) -> None:
    tmp = target.parent / f".{target.name}.cudatrace-tmp"
    if tmp.exists() or tmp.is_symlink():
        tmp.unlink()
    shutil.copy2(backup, tmp, follow_symlinks=False)
    os.replace(tmp, target)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def clean_leftovers(program: str | os.PathLike[str]) -> tuple[FileProof, ...]:
    """Remove what an apply or restore killed midway left beside ``program``: a staging folder that was never
    renamed into place (``.<program>.zluda.tmp-*``) and half-written files (``.<name>.cudatrace-tmp``).

    Neither is ever in use: the staging folder only counts once renamed, a file only once renamed over its
    target. Returns one ``"removed"`` proof per leftover.
    """
    prog = Path(program)
    folder = prog.parent
    staging = staging_dir_of(prog)
    proofs: list[FileProof] = []
    try:
        candidates = sorted(
            [*folder.glob(f".{glob_escape(staging.name)}.tmp-*"), *folder.glob(".*.cudatrace-tmp")], key=str
        )
    except OSError:
        return ()
    for leftover in candidates:
        try:
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()
        except OSError as exc:
            raise _err("cannot remove a leftover of an interrupted configure", leftover, exc) from None
        proofs.append(FileProof(str(leftover), "removed leftover", None, None))
    return tuple(proofs)


def glob_escape(name: str) -> str:
    """``name`` with the characters glob reads as patterns escaped."""
    import glob

    return glob.escape(name)


def changed_since_apply(program: str | os.PathLike[str], doc: dict[str, Any]) -> list[tuple[Path, str]]:
    """The files ``--apply`` wrote that no longer have the hash the manifest recorded: (path, what happened)."""
    prog = Path(program)
    folder = prog.parent
    staging = staging_dir_of(prog)
    changed: list[tuple[Path, str]] = []

    def check(path: Path, expected: str, undone: str | None, gone_ok: bool) -> None:
        # ``undone``: the hash the file has once restored (an interrupted restore got that far), which is fine.
        if not (path.exists() or path.is_symlink()):
            if not gone_ok:
                changed.append((path, "removed"))
        elif path.is_file() and sha256_of(path) not in (expected, undone):
            changed.append((path, "changed"))

    for entry in doc.get("staged", ()):
        if isinstance(entry, dict) and entry.get("name") and entry.get("sha256"):
            check(staging / str(entry["name"]), str(entry["sha256"]), None, False)
    for entry in doc.get("added", ()):
        check(folder / entry["name"], str(entry.get("sha256", "")), None, True)
    for entry in doc.get("replaced", ()):
        check(folder / entry["name"], str(entry.get("sha256_after", "")), str(entry.get("sha256_before", "")), False)
    return changed


def _keep_changed(program: Path, changed: list[tuple[Path, str]]) -> tuple[FileProof, ...]:
    """Copy the changed files to a new ``<program>.zluda-changed-N`` folder beside the program (restore would
    otherwise throw them away); one ``"kept"`` proof per file."""
    folder = program.parent
    base = f"{staging_dir_of(program).name}-changed"
    n = 1
    while (folder / f"{base}-{n}").exists():
        n += 1
    keep = folder / f"{base}-{n}"
    proofs: list[FileProof] = []
    try:
        keep.mkdir()
        for path, what in changed:
            if what == "removed":
                continue
            name = path.name if path.parent == folder else f"{path.parent.name}.{path.name}"
            shutil.copy2(path, keep / name, follow_symlinks=False)
            digest = sha256_of(path)
            proofs.append(FileProof(str(keep / name), "kept", digest, sha256_of(keep / name)))
    except OSError as exc:
        raise _err("cannot keep a copy of the files changed since --apply; nothing restored", keep, exc) from None
    return tuple(proofs)


def read_manifest(program: str | os.PathLike[str]) -> dict[str, Any]:
    """The stage manifest of a configured program; ConfigureError when the program was not configured."""
    path = staging_dir_of(program) / MANIFEST_NAME
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise ConfigureError(f"stage manifest is larger than {MAX_MANIFEST_BYTES} bytes", str(path))
        doc = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise ConfigureError("nothing to restore: no stage manifest", str(path)) from None
    except (OSError, ValueError) as exc:
        raise ConfigureError(f"stage manifest is not readable: {exc}", str(path)) from None
    if not isinstance(doc, dict) or doc.get("schema") != MANIFEST_SCHEMA:
        raise ConfigureError("not a cudatrace stage manifest", str(path))
    for entry in [*doc.get("added", ()), *doc.get("replaced", ())]:
        name = entry.get("name", "") if isinstance(entry, dict) else ""
        if not name or "/" in name or "\\" in name or name in (".", ".."):
            raise ConfigureError(f"stage manifest names an unsafe file {name!r}", str(path))
    return doc


def restore(program: str | os.PathLike[str], *, force: bool = False) -> StageReport:
    """Undo ``apply_plan``: every replaced file back byte for byte (checked by sha256), every added file removed.

    Leftovers of an interrupted apply or restore are removed first (a program with only those to undo is
    restored too). Files changed since the apply (a staged library, the launcher) stop the restore with a
    ConfigureError naming them; with ``force`` they are copied to ``<program>.zluda-changed-N`` first.
    """
    prog = Path(program).resolve() if Path(program).exists() else Path(program)
    staging = staging_dir_of(prog)
    folder = prog.parent
    try:
        doc = read_manifest(prog)
    except ConfigureError:
        leftovers = clean_leftovers(prog)
        if leftovers and not (staging.exists() or staging.is_symlink()):
            return StageReport(str(prog), str(staging), None, leftovers)
        raise
    changed = changed_since_apply(prog, doc)
    kept: tuple[FileProof, ...] = ()
    if changed and not force:
        listed = ", ".join(f"{p} ({what})" for p, what in changed[:5])
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        raise ConfigureError(
            f"{len(changed)} file{'s' if len(changed) != 1 else ''} changed since --apply: {listed}{more}; "
            "nothing restored (--force keeps a copy of them and restores)",
            str(prog),
        )
    if changed:
        kept = _keep_changed(prog, changed)
    leftovers = clean_leftovers(prog)
    backups = staging / BACKUP_DIR
    for entry in doc.get("replaced", ()):
        backup = backups / entry["name"]
        if not (backup.exists() or backup.is_symlink()):
            raise ConfigureError("backup missing: cannot restore", str(backup))
        if sha256_of(backup) != entry["sha256_before"]:
            raise ConfigureError("backup does not match its recorded sha256: cannot restore", str(backup))
    proofs: list[FileProof] = []
    try:
        for entry in doc.get("replaced", ()):
            target = folder / entry["name"]
            _restore_one(backups / entry["name"], target)
            proofs.append(FileProof(str(target), "restored", entry["sha256_before"], sha256_of(target)))
        for entry in doc.get("added", ()):
            target = folder / entry["name"]
            if target.is_file() or target.is_symlink():
                target.unlink()
            proofs.append(FileProof(str(target), "removed", None, sha256_of(target) if target.exists() else None))
    except OSError as exc:
        raise _err("cannot restore; the staging folder and its backups are kept", folder, exc) from None
    bad = [p for p in proofs if not p.ok]
    if bad:
        raise ConfigureError("restored file does not match its recorded sha256; staging folder kept", bad[0].path)
    try:
        shutil.rmtree(staging)
    except OSError as exc:
        raise _err("restored every file but cannot remove the staging folder", staging, exc) from None
    proofs.append(FileProof(str(staging), "removed", None, None if not staging.exists() else "still there"))
    return StageReport(str(prog), str(staging), None, (*leftovers, *kept, *proofs))
