"""``python -m neta_jupyter.widgets --comm-schema``: print the JSON Schema of the widget's comm."""

from __future__ import annotations

import argparse
import json

from .schema import comm_schema


def main() -> None:
    """Command-line entry."""
    parser = argparse.ArgumentParser(prog="python -m neta_jupyter.widgets")
    parser.add_argument(
        "--comm-schema", action="store_true", help="print the comm protocol's JSON Schema"
    )
    if not parser.parse_args().comm_schema:
        parser.print_help()
        return
    print(json.dumps(comm_schema(), indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
