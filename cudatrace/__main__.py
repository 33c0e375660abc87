"""``python -m cudatrace``."""

from __future__ import annotations

from cudatrace.cli import main

raise SystemExit(main())
