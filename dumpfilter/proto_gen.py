"""Generates the gRPC/protobuf modules in dumpfilter/v1/ from proto/ (never committed, never
hand-edited). `ensure_generated()` runs on import of the master and slave adapters;
`python -m dumpfilter.proto_gen` regenerates for Makefiles and CI."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTO_ROOT = ROOT / "proto"
PROTOS = ("dumpfilter/v1/dump.proto",)
OUTPUTS = ("dump_pb2.py", "dump_pb2.pyi", "dump_pb2_grpc.py")
OUT_DIR = ROOT / "dumpfilter" / "v1"


class ProtoGenError(RuntimeError):
    """protoc failed; the message carries its output."""


def _stale() -> bool:
    if not (PROTO_ROOT / PROTOS[0]).exists():
        # An installed package (a wheel): the modules were generated when it was built.
        return not all((OUT_DIR / name).exists() for name in OUTPUTS)
    newest_proto = max((PROTO_ROOT / p).stat().st_mtime for p in PROTOS)
    for name in OUTPUTS:
        out = OUT_DIR / name
        if not out.exists() or out.stat().st_mtime < newest_proto:
            return True
    return False


def generate() -> None:
    """Run grpc_tools.protoc into a temporary directory, then move the files in place one by one
    with os.replace, so a concurrent importer never sees a half-written module."""
    from grpc_tools import protoc  # build-time dependency only

    import grpc_tools
    include = Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp:
        args = ["protoc", f"-I{PROTO_ROOT}", f"-I{include}", f"--python_out={tmp}", f"--pyi_out={tmp}",
                f"--grpc_python_out={tmp}", *[str(PROTO_ROOT / p) for p in PROTOS]]
        status = protoc.main(args)
        if status != 0:
            raise ProtoGenError(f"protoc exited {status} for {' '.join(PROTOS)}")
        OUT_DIR.mkdir(exist_ok=True)
        for name in OUTPUTS:
            os.replace(Path(tmp) / "dumpfilter" / "v1" / name, OUT_DIR / name)


def ensure_generated() -> None:
    """Generate when a module is missing or older than its .proto."""
    if _stale():
        generate()


def main() -> int:
    try:
        generate()
    except ProtoGenError as exc:
        print(f"proto_gen: {exc}", file=sys.stderr)
        return 1
    print(f"generated {', '.join(OUTPUTS)} in {OUT_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
