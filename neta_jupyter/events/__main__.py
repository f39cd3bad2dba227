"""``python -m neta_jupyter.events --schema``: print the JSON Schema of the whole catalogue."""

from __future__ import annotations

import argparse
import json

from .encoding import catalogue_schema


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(prog="python -m neta_jupyter.events")
    parser.add_argument("--schema", action="store_true", help="print the event JSON Schema")
    args = parser.parse_args()
    if not args.schema:
        parser.print_help()
        return
    print(json.dumps(catalogue_schema(), indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
