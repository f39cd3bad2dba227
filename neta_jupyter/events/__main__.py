"""``python -m neta_jupyter.events``: the catalogue's schema, and the files generated from it.

``--schema`` prints the JSON Schema; ``--write`` writes every generated file that is stale (the
enum and union, the schema, the widget's TypeScript catalogue); ``--check`` only names them and
fails when there are any.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from .encoding import catalogue_schema
from .generate import GENERATED, ROOT, stale, write


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(prog="python -m neta_jupyter.events")
    parser.add_argument("--schema", action="store_true", help="print the event JSON Schema")
    parser.add_argument("--write", action="store_true", help="write the generated files")
    parser.add_argument("--check", action="store_true", help="fail when one is stale")
    args = parser.parse_args()
    if args.schema:
        print(json.dumps(catalogue_schema(), indent=2, sort_keys=True))
    elif args.write:
        changed = write()
        for path in changed:
            print(f"wrote {path.relative_to(ROOT)}")
        if GENERATED in changed:
            # The schema and the TypeScript read the enum this process imported before it
            # changed: a new process writes them from the new one.
            subprocess.run([sys.executable, "-m", "neta_jupyter.events", "--write"], check=True)
    elif args.check:
        paths = stale()
        for path in paths:
            print(f"stale: {path.relative_to(ROOT)} (python -m neta_jupyter.events --write)")
        sys.exit(1 if paths else 0)
    else:
        parser.print_help()


if __name__ == "__main__":
    main()
