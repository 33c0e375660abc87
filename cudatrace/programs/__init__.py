"""Programs, not a pile of binaries: group a scan's binaries into programs and judge each as a whole.

:func:`group_programs` reads the files around the binaries (dist-info folders, Python import lines) and decides
which binaries make up which program and which of them start with it; :func:`judge_programs` turns the
binaries' verdicts for a release into each program's verdict.
"""

from cudatrace.programs.grouping import group_programs, is_nvidia_library
from cudatrace.programs.judging import judge_programs

__all__ = ["group_programs", "is_nvidia_library", "judge_programs"]
