"""Build hook only (metadata lives in pyproject.toml): the gRPC/protobuf modules of
dumpfilter/v1 are generated from proto/ when the package is built, so a wheel carries them and
never needs proto/ or grpc_tools at run time. The compiled core is built by setuptools-rust."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithProto(build_py):
    def run(self):
        super().run()
        import importlib.util

        spec = importlib.util.spec_from_file_location("proto_generate", Path(__file__).parent / "proto" / "generate.py")
        proto_gen = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(proto_gen)

        proto_gen.generate()  # into the source tree (an editable install imports it from there)
        if not self.editable_mode:
            target = Path(self.build_lib) / "dumpfilter" / "v1"
            target.mkdir(parents=True, exist_ok=True)
            for name in proto_gen.OUTPUTS:
                self.copy_file(str(proto_gen.OUT_DIR / name), str(target / name))


setup(cmdclass={"build_py": BuildPyWithProto})
