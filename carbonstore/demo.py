"""``make demo``: the main job end to end on the embedded default.

Generates a small sample data set under ./sample_data, then, on local Spark into
./carbon.store: creates the table ``demo.sales``, loads the sample twice, shows the
segments, prunes and queries with a filter, compacts, and shows the segments again.
"""

from __future__ import annotations

import csv
import random
import shlex
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path

from carbonstore import Store
from carbonstore.cli import main as cli

SAMPLE_DIR = Path("sample_data")
TABLE = "demo.sales"
SCHEMA = (
    "id long not null, day date, city string, product string, qty int, price double, "
    "amount decimal(12,2)"
)
CITIES = ["Amsterdam", "Berlin", "Chennai", "Dublin", "Espoo", "Fukuoka", "Graz", "Hanoi"]


def generate(path: Path, *, start_id: int, rows: int, seed: int) -> Path:
    """Write a CSV of ``rows`` sales with a header; ids start at ``start_id``."""
    rnd = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    day0 = date(2026, 1, 1)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "day", "city", "product", "qty", "price", "amount"])
        for i in range(start_id, start_id + rows):
            qty = rnd.randint(1, 20)
            price = round(rnd.uniform(0.5, 500.0), 2) if rnd.random() > 0.01 else float("nan")
            amount = "" if price != price else f"{qty * price:.2f}"
            w.writerow([
                i,
                (day0 + timedelta(days=i // 500)).isoformat(),
                rnd.choice(CITIES),
                f"product_{rnd.randint(0, 199):03d}",
                qty,
                "NaN" if price != price else price,
                amount,
            ])
    return path


def command_line(argv: Sequence[str]) -> str:
    """``carbonstore ARGS`` as a POSIX shell reads it: paste it and it runs the same."""
    return shlex.join(["carbonstore", *argv])


def step(title: str, *argv: str) -> None:
    print(f"\n# {title}\n$ {command_line(argv)}", flush=True)
    rc = cli(list(argv))
    if rc != 0:
        raise SystemExit(rc)


def run() -> None:
    first = generate(SAMPLE_DIR / "sales_1.csv", start_id=0, rows=20_000, seed=1)
    second = generate(SAMPLE_DIR / "sales_2.csv", start_id=20_000, rows=20_000, seed=2)
    print(f"sample data: {first} and {second}")

    if Store().exists(TABLE):
        step("start from a fresh table", "drop", TABLE)
    step(
        "create the table",
        "create", TABLE, "--schema", SCHEMA, "--sort-columns", "id", "--bloom", "product",
    )
    step("show the table", "describe", TABLE)
    opts = ("--option", "header=true", "--master", "local[2]")
    step("first load: one segment", "load", TABLE, "--input", str(first), *opts)
    step("second load: another segment", "load", TABLE, "--input", str(second), *opts)
    step("list the segments", "show-segments", TABLE)
    where = "id = 31337"
    step("prune from the side indexes alone", "prune", TABLE, "--where", where)
    step("query through Spark with the plan", "query", TABLE, "--where", where)
    step(
        "a bloom-filter lookup",
        "query", TABLE, "--select", "id,city,product", "--where", "product = 'product_042'",
        "--limit", "5",
    )
    step("merge the two segments", "compact", TABLE, "--type", "major")
    step("the segments after compaction", "show-segments", TABLE)
    step(
        "the same answer from the compacted segment",
        "sql", f"SELECT city, count(*) AS n, round(sum(amount), 2) AS total FROM {TABLE} "
        "GROUP BY city ORDER BY city",
    )
    step("column statistics of the table", "stats", TABLE)


if __name__ == "__main__":
    run()
