"""Regenerate the committed gRPC/protobuf code from ``proto/`` (``make proto``).

What: runs grpcio-tools' bundled protoc on every ``proto/ldp/wire/v1/*.proto`` with ``-Iproto``,
so the generated modules land in ``ldp/wire/v1/`` and import each other absolutely
(``ldp.wire.v1.aggregator_pb2``). With mypy-protobuf installed it also writes typed stubs
(``*.pyi``). Guarantee: ``generate(tmp)`` writes exactly what ``generate()`` would commit, so
``tests/wire/test_codegen.py`` can compare byte for byte and fail when the committed code is stale.
Source: docs/design.md §3 (generated code is committed; one command regenerates it).

Usage: ``python -m ldp.wire.codegen [--out DIR]`` (default: the repository root).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

__all__ = ["REPO_ROOT", "PROTO_ROOT", "proto_files", "generate", "generated_files"]

REPO_ROOT = Path(__file__).resolve().parents[2]
PROTO_ROOT = REPO_ROOT / "proto"
PACKAGE_DIR = Path("ldp") / "wire" / "v1"


def proto_files() -> list[Path]:
    """The .proto sources, relative to ``proto/``, sorted (deterministic output)."""
    return sorted(p.relative_to(PROTO_ROOT) for p in (PROTO_ROOT / PACKAGE_DIR).glob("*.proto"))


def _has_mypy_plugin() -> bool:
    return shutil.which("protoc-gen-mypy", path=str(Path(sys.executable).parent)) is not None


def generate(out_root: Path = REPO_ROOT) -> list[Path]:
    """Compile every .proto into ``out_root/ldp/wire/v1``; return the files written."""
    import grpc_tools
    from grpc_tools import protoc  # dev dependency; imported here so runtime code never needs it

    out_root = Path(out_root)
    (out_root / PACKAGE_DIR).mkdir(parents=True, exist_ok=True)
    include = str(Path(grpc_tools.__file__).parent / "_proto")  # well-known types
    args = ["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{include}", f"--python_out={out_root}", f"--grpc_python_out={out_root}"]
    if _has_mypy_plugin():
        bindir = Path(sys.executable).parent
        args += [
            f"--plugin=protoc-gen-mypy={bindir / 'protoc-gen-mypy'}",
            f"--plugin=protoc-gen-mypy_grpc={bindir / 'protoc-gen-mypy_grpc'}",
            f"--mypy_out={out_root}",
            f"--mypy_grpc_out={out_root}",
        ]
    args += [str(p) for p in proto_files()]
    code = protoc.main(args)
    if code != 0:
        raise RuntimeError(f"protoc failed with exit code {code}: {' '.join(args)}")
    return generated_files(out_root)


def generated_files(root: Path = REPO_ROOT) -> list[Path]:
    """Generated files under ``root/ldp/wire/v1`` (everything except ``__init__.py``)."""
    folder = Path(root) / PACKAGE_DIR
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name != "__init__.py" and p.suffix in {".py", ".pyi"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT, help="output root (default: repository root)")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
