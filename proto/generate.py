"""Build-time only: generates the gRPC/protobuf modules of dumpfilter/v1/ from proto/ (never
committed, never hand-edited, never generated at import). setup.py's build hook runs it on every
install (wheel, editable); `python proto/generate.py` regenerates after editing the .proto."""

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


def stale() -> bool:
    """A module is missing or older than its .proto."""
    newest_proto = max((PROTO_ROOT / p).stat().st_mtime for p in PROTOS)
    return any(not (OUT_DIR / name).exists() or (OUT_DIR / name).stat().st_mtime < newest_proto
               for name in OUTPUTS)


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


def main() -> int:
    if "--if-stale" in sys.argv and not stale():
        return 0
    try:
        generate()
    except ProtoGenError as exc:
        print(f"proto/generate.py: {exc}", file=sys.stderr)
        return 1
    print(f"generated {', '.join(OUTPUTS)} in {OUT_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
