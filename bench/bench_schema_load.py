"""How long a `--schema FILE` takes to load (`python -m bench schema_load`): a `mysqldump --no-data`
shaped dump of 40 databases x 1,000 tables (version comments, DROP before each CREATE, keys, a
trigger every 50 tables, a view per database), loaded by `dumpfilter explain --schema FILE` in a
process of its own, against the same command without `--schema`, interleaved (best of 3 each):
the difference is the load. A diagnostic: one file, read whole, no stream; no peer reads a dump
into a schema model.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.bench_filter import interleaved
from bench.common import write_result

DATABASES, TABLES, TRIGGER_EVERY = 40, 1000, 50
TYPES = ("int(11) NOT NULL DEFAULT 0", "varchar(64) DEFAULT NULL COMMENT 'a (note)'", "decimal(10,2) DEFAULT NULL",
         "datetime DEFAULT current_timestamp()")


def write_dump(path: Path, seed: int = 1) -> int:
    """The dump at `path`; returns its table count."""
    rng = random.Random(seed)
    out = ["-- MariaDB dump 10.19  Distrib 10.11.6-MariaDB", "/*!40101 SET NAMES utf8mb4 */;"]
    for d in range(DATABASES):
        out.append(f"CREATE DATABASE /*!32312 IF NOT EXISTS*/ `tenant{d}` /*!40100 DEFAULT CHARACTER SET utf8mb4 */;"
                   f"\n\nUSE `tenant{d}`;")
        for t in range(TABLES):
            columns = ",\n".join(f"  `c{i}` {rng.choice(TYPES)}" for i in range(8))
            out.append(f"DROP TABLE IF EXISTS `t{t}`;\n/*!40101 SET character_set_client = utf8 */;\n"
                       f"CREATE TABLE `t{t}` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n{columns},\n"
                       f"  PRIMARY KEY (`id`),\n  KEY `k1` (`c0`,`c1`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;")
            if t % TRIGGER_EVERY == 0:
                out.append(f"DELIMITER ;;\n/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`localhost`*/ /*!50003 TRIGGER "
                           f"tr{t} AFTER INSERT ON t{t} FOR EACH ROW BEGIN INSERT INTO t{t + 1} (c0) VALUES (NEW.c0); "
                           "END */;;\nDELIMITER ;")
        out.append("/*!50001 DROP VIEW IF EXISTS `v`*/;\n/*!50001 CREATE ALGORITHM=UNDEFINED */\n/*!50013 DEFINER=`root`@"
                   "`localhost` SQL SECURITY DEFINER */\n/*!50001 VIEW `v` AS select `t0`.`id` AS `id` from `t0` */;")
    path.write_text("\n".join(out) + "\n")
    return DATABASES * TABLES


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "dump.sql"
        tables = write_dump(dump)
        size = dump.stat().st_size
        explain = [sys.executable, "-m", "dumpfilter", "explain", "--replicate-do-db=tenant0", "--sql",
                   "UPDATE tenant0.t1 JOIN tenant0.t2 USING (id) SET c3 = 1"]

        def run(argv: list[str]):
            return lambda: subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

        best = interleaved({"bare": run(explain), "schema": run([*explain, "--schema", str(dump)])}, rounds=3)
    load = best["schema"][0] - best["bare"][0]
    result = {"dump_mb": round(size / 1e6, 1), "tables": tables, "load_s": round(load, 2),
              "mb_per_s": round(size / 1e6 / load, 1), "tables_per_s": round(tables / load)}
    print(f"--schema of a {result['dump_mb']} MB --no-data dump ({tables} tables): loaded in {result['load_s']} s "
          f"({result['mb_per_s']} MB/s, {result['tables_per_s']} tables/s) [diagnostic: one file, read whole]")
    write_result("schema_load", result)
    return result


if __name__ == "__main__":
    main()
