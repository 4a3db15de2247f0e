"""Starting (or joining) a Spark session for the jobs.

The master is never hard-coded: under `spark-submit` the session takes spark-submit's `--master`;
run directly (`python -m spark_jobs...`, `dumpfilter split`), it takes `--spark-master`, else the
`SPARK_MASTER` environment variable, else `local[*]`. In local mode every port it opens is on loopback. Python workers run this interpreter
(`spark.pyspark.python`) unless PYSPARK_PYTHON says otherwise, so they see the same packages.
`conf` (the commands' repeatable `--spark-conf KEY=VALUE`) is applied last, so it can pin any
setting, e.g. the ports a firewall or a shared machine needs fixed: `spark.ui.port`,
`spark.driver.port`, `spark.blockManager.port` (`session_settings` computes it all without Spark).
The session's JVM runs in a process group of its own and is stopped (`stop_session`) before the
command's process ends, interrupted or not, also while it starts (`end_gateway`); it gets SIGTERM
if the command is killed outright (`dumpfilter.children`): nothing of it outlives the command.
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import logging
import os
import signal
import subprocess
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

from dumpfilter.children import dies_with_parent

if TYPE_CHECKING:  # pyspark loads with the first session
    from pyspark import SparkContext
    from pyspark.sql import SparkSession


JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


def under_spark_submit() -> bool:
    """spark-submit launches the Python driver with a gateway to its already-started JVM."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def session_settings(master: str | None = None, conf: dict[str, str] | None = None) -> tuple[str | None, dict[str, str]]:
    """(the master URL to set, None under spark-submit; every config key and value the session
    builder gets), `conf` last so that it wins. Reads the environment, changes nothing."""
    master = master or os.environ.get("SPARK_MASTER")
    if not master and not under_spark_submit():
        master = "local[*]"
    settings = {"spark.pyspark.python": os.environ.get("PYSPARK_PYTHON", sys.executable),
                "spark.ui.showConsoleProgress": "false", "spark.sql.execution.arrow.pyspark.enabled": "true"}
    if master and master.startswith("local"):
        # Local mode talks only to itself: the driver's RPC and block manager ports, and the web
        # UI (which listens on SPARK_LOCAL_IP, else on every interface), stay on loopback.
        settings.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    # The jobs' work is in Python; the JVMs only schedule and pass small results. The driver's C2
    # compiler spent 0.3-1.3 s of CPU per job on it (issue #40: on 2 cores, a third of what the
    # tasks' work takes), C1 alone a tenth of that; the session also starts faster. A cluster's
    # executors are JVMs of their own, each with its C2 compiling the same way.
    settings["spark.driver.extraJavaOptions"] = JVM_OPTIONS
    if master and not master.startswith("local"):
        settings["spark.executor.extraJavaOptions"] = JVM_OPTIONS
    settings.update(conf or {})
    return master, settings


def on_loopback(master: str | None) -> bool:
    """Whether the session's JVM should bind loopback (SPARK_LOCAL_IP=127.0.0.1): local mode, or a
    standalone master on loopback (`spark://127.0.0.1:7077`, `spark://localhost:7077`, each host of
    a `spark://h1:p1,h2:p2` list). Without it, where the machine's hostname resolves to a loopback
    address, Spark warns and picks another interface's address for the driver."""
    if not master:
        return False
    if master.startswith("local"):
        return True
    if not master.startswith("spark://"):
        return False
    hosts = [part.rpartition(":")[0] or part for part in master[len("spark://"):].split(",")]
    return all(_loopback_host(host.strip("[]")) for host in hosts)


def _loopback_host(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: the cluster is wherever it resolves, and Spark's choice stands


def get_session(app_name: str, master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    master, settings = session_settings(master, conf)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    if on_loopback(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    for key, value in settings.items():
        builder = builder.config(key, value)
    drop_interrupt_noise()  # also while the session starts (PySpark's handler)
    _ENDING.clear()  # (a new session: what py4j logs is heard again)
    _launch_own_gateway(app_name, master, settings)
    try:
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        quiet_interrupts(spark.sparkContext)
    except BaseException:  # interrupted (or failed) while the session starts: its JVM goes now
        end_gateway(STOP_GRACE)
        raise
    if spark not in _TO_STOP:
        _TO_STOP.append(spark)
        atexit.register(stop_session, spark)
    return spark


# Sessions get_session started, stopped at the latest when the interpreter exits.
_TO_STOP: list[SparkSession] = []
# Seconds the JVM is given to stop the session and exit before it is killed.
STOP_GRACE = 60.0


def _launch_own_gateway(app_name: str, master: str | None, settings: dict[str, str]) -> None:
    """PySpark's JVM, launched as PySpark would (spark-submit with the same settings) but in a
    process group of its own. Ctrl-C at a terminal goes to the whole foreground group: the session's
    Python workers, which the JVM starts, died of it in the middle of their tasks, and the JVM
    printed each lost task with its Java stack trace after `dumpfilter: interrupted`. In a group of
    its own the JVM and its workers hear only what the command tells them (`stop_session`). Under
    spark-submit (its JVM is there already) or with a gateway up: nothing to do."""
    try:
        from pyspark import SparkConf, SparkContext
        from pyspark.java_gateway import launch_gateway
    except ImportError:  # a stand-in pyspark (tests): its builder does what it does
        return
    if under_spark_submit() or SparkContext._gateway is not None:
        return
    spark_conf = SparkConf(loadDefaults=False).setAppName(app_name)
    if master:
        spark_conf.setMaster(master)
    spark_conf.setAll(list(settings.items()))
    from pyspark import java_gateway

    started: list[subprocess.Popen[bytes]] = []
    popen = java_gateway.Popen
    # (pyspark's own preexec_fn replaces one passed in popen_kwargs)
    setattr(java_gateway, "Popen", _popen_dying_with_us(started))  # noqa: B010 - mypy: a class, replaced
    try:
        # (pyspark.java_gateway has no annotations)
        gateway = launch_gateway(spark_conf, popen_kwargs={"start_new_session": True})  # type: ignore[no-untyped-call]
        SparkContext._ensure_initialized(gateway=gateway)
    except BaseException:
        # Interrupted (or failed) while the JVM starts: PySpark drops the process it launched, which
        # went on starting, orphaned, a gateway port listening, its spark-* directories in TMPDIR
        # and, once it found its connection file gone, a Java stack trace on the terminal.
        for proc in started:
            _end_group(proc, STOP_GRACE)
        raise
    finally:
        setattr(java_gateway, "Popen", popen)  # noqa: B010


def _popen_dying_with_us(started: list[subprocess.Popen[bytes]]) -> type[subprocess.Popen[bytes]]:
    """subprocess.Popen for pyspark.java_gateway: its preexec_fn (SIGINT ignored) is followed by
    `dies_with_parent(SIGTERM)`, so that the JVM ends, its shutdown hooks run (Spark's spark-*
    directories removed), even when this process is killed outright; each process is recorded in
    `started`."""
    dying = dies_with_parent(signal.SIGTERM)

    class Launch(subprocess.Popen[bytes]):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            own = kwargs.get("preexec_fn")
            if dying is not None:
                def preexec() -> None:
                    if own is not None:
                        own()
                    dying()

                kwargs["preexec_fn"] = preexec
            super().__init__(*args, **kwargs)
            started.append(self)

    return Launch


def _end_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """The launched JVM's process group (it leads one: start_new_session) told to end (SIGTERM: its
    shutdown hooks run), waited for, and killed after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def stop_session(spark: SparkSession, grace: float = STOP_GRACE) -> None:
    """Stop the session and end its JVM, waiting for it: quietly (its log off first, so a stage cut
    short prints no Java stack trace), its jobs cancelled, the JVM told to exit by the end of its
    standard input (as PySpark arranges it), and killed after `grace` seconds. Safe to call twice,
    or after the JVM is gone."""
    if spark in _TO_STOP:
        _TO_STOP.remove(spark)
    _ENDING.set()
    try:
        from pyspark import SparkContext  # noqa: F401
    except ImportError:  # a stand-in pyspark (tests): no JVM to end
        return

    def quietly_stop() -> None:
        # A thread of its own: py4j gives it a connection of its own, where the main thread's may
        # be cut in the middle of a call by the interrupt.
        with contextlib.suppress(Exception):  # a stopping or stopped JVM: nothing left to stop
            sc = spark.sparkContext
            sc.setLogLevel("OFF")
            sc.cancelAllJobs()
            spark.stop()

    stopper = threading.Thread(target=quietly_stop, name="spark-stop", daemon=True)
    stopper.start()
    stopper.join(grace)
    end_gateway(grace)


def end_gateway(grace: float = STOP_GRACE) -> None:
    """The JVM this process launched (`_launch_own_gateway`), with or without a session on it,
    told to exit by the end of its standard input (as PySpark arranges it) and waited for; killed,
    with its process group, after `grace` seconds. Under spark-submit (its JVM is spark-submit's own
    to end), or with none launched: nothing."""
    try:
        from pyspark import SparkContext
    except ImportError:  # a stand-in pyspark (tests): no JVM to end
        return
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None or gateway is None:
        return
    _ENDING.set()  # (a call another thread is inside ends on a closed socket)
    with contextlib.suppress(Exception):  # (as in stop_session)
        gateway.close()
    with SparkContext._lock:
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkContext._active_spark_context = None
    with contextlib.suppress(Exception):
        proc.stdin.close()  # the gateway's JVM exits at the end of its standard input
    try:
        proc.wait(grace)
    except Exception:  # noqa: BLE001 - still there after the grace: it goes
        _end_group(proc, 0)


def quiet_interrupts(sc: SparkContext) -> None:
    """Ctrl-C during a job: its Spark jobs are cancelled and the command ends with its one line.
    PySpark's own SIGINT handler calls into the JVM from the signal handler, while the main thread
    is inside a call to it: py4j refuses the reentrant call, and it and the interrupted call each
    log a traceback (four of them, about 50 lines, before `dumpfilter: interrupted`). Here the
    cancel goes on a thread of its own (py4j gives each thread its own connection), and what py4j
    logs once the interrupt has come is dropped (PY4J_LOGGERS)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def cancel() -> None:
        with contextlib.suppress(Exception):  # the JVM may be gone already: nothing left to cancel
            # (its log off first: a cancelled task's completion listener can log an ERROR with a
            # Java stack trace, blockDoesNotExistError, before `stop_session` turns the log off)
            sc.setLogLevel("OFF")
            sc.cancelAllJobs()

    def handler(_signum: int, _frame: FrameType | None) -> None:
        _ENDING.set()
        threading.Thread(target=cancel, name="spark-cancel", daemon=True).start()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    # SIGTERM, where the command takes it as an interrupt (dumpfilter.cli.process): the same cancel,
    # then the command's own handler (which raises). Where SIGTERM ends the process (its default),
    # it is left so.
    previous = signal.getsignal(signal.SIGTERM)
    if callable(previous) and not getattr(previous, "spark_cancels", False):
        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            _ENDING.set()
            threading.Thread(target=cancel, name="spark-cancel", daemon=True).start()
            previous(signum, frame)

        on_sigterm.spark_cancels = True  # type: ignore[attr-defined]
        signal.signal(signal.SIGTERM, on_sigterm)


# Where py4j logs: the root logger (java_gateway's logging.exception calls) and its own named
# loggers. A logger's filter sees only the records made on it, not those its children pass up,
# so each one gets the filter: clientserver's "Exception occurred while shutting down connection"
# (a BrokenPipeError after the interrupt) came through on its own logger, with two tracebacks.
PY4J_LOGGERS = ("", "py4j", "py4j.java_gateway", "py4j.clientserver", "py4j.protocol")

# Set once an interrupt has come or a session is being stopped (`quiet_interrupts`, `stop_session`,
# `end_gateway`), cleared when a session starts: py4j's failures then are the ending's, not news.
_ENDING = threading.Event()


def drop_interrupt_noise() -> None:
    """`_interrupt_noise` on every logger py4j logs through (once each)."""
    for name in PY4J_LOGGERS:
        logger = logging.getLogger(name)
        if _interrupt_noise not in logger.filters:
            logger.addFilter(_interrupt_noise)


def _interrupt_noise(record: logging.LogRecord) -> bool:
    """False for what py4j logs (through the root logger) about a call an interrupt cut short: a
    KeyboardInterrupt, or the reentrant call PySpark's handler makes, anywhere in its exception's
    chain; or any exception once the session is ending (`_ENDING`: an interrupt came, or the
    session is being stopped). A call another thread is inside (a stage's progress) then ends on
    the socket its gateway closed: a CI run printed py4j's "Exception while sending command."
    with a ValueError (readline of closed file) and a Py4JNetworkError after a Ctrl-C. Every other
    record passes."""
    if "py4j" not in record.pathname or not record.exc_info:
        return True
    if _ENDING.is_set():
        return False
    exc = record.exc_info[1]
    while exc is not None:
        if isinstance(exc, KeyboardInterrupt) or (isinstance(exc, RuntimeError) and "reentrant call" in str(exc)):
            return False
        exc = exc.__cause__ or exc.__context__
    return True
