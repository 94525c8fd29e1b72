"""CSV formula injection: every CSV the project writes (matrix.csv, ranking.csv of an export,
results.csv of ``llmduel reproduce``) goes through one writer (algorithms/csv_cells.py) that
prefixes text cells starting with = + - @ tab or CR with a single quote; numbers stay numbers."""

from __future__ import annotations

import csv
import io
import json

import pytest
from service_helpers import campaign_body, simulated_judge

from algorithms.csv_cells import FORMULA_STARTS, csv_cell, write_csv

HOSTILE = ["=1+2", "@SUM(A1)", "-2+3", "+cmd|' /C calc'!A0"]


@pytest.mark.parametrize("start", FORMULA_STARTS)
def test_text_cells_starting_like_a_formula_get_a_quote(start):
    assert csv_cell(start + "x") == "'" + start + "x"


@pytest.mark.parametrize("start", ["\uff1d", "\uff0b", "\uff0d", "\uff20", "\ufe66", "\u2212"])
def test_full_width_and_small_formula_starts_get_a_quote(start):
    """＝ ＋ － ＠ ﹦ − : spreadsheets in East Asian locales read ＝1+2 as a formula."""
    assert csv_cell(start + "1+2") == "'" + start + "1+2"


def test_numbers_and_plain_text_are_left_alone():
    assert csv_cell(-0.25) == -0.25 and csv_cell(-3) == -3 and csv_cell(0.0) == 0.0
    assert csv_cell("model a") == "model a" and csv_cell("a=b") == "a=b" and csv_cell(None) == ""
    buf = io.StringIO()
    write_csv(buf, ["model", "delta"], [{"model": "=1+2", "delta": -0.5}, {"model": "ok", "extra": "ignored"}])
    assert list(csv.reader(io.StringIO(buf.getvalue()))) == [["model", "delta"], ["'=1+2", "-0.5"], ["ok", ""]]


async def test_export_csvs_escape_hostile_model_names(api):
    body = campaign_body(
        costs=(1.0, 1.0, 1.0, 1.0),
        judge=simulated_judge(
            P=[[0.5, 0.7, 0.7, 0.7], [0.3, 0.5, 0.5, 0.5], [0.3, 0.5, 0.5, 0.5], [0.3, 0.5, 0.5, 0.5]]
        ),
        max_duels=12,
    )
    for m, name in zip(body["models"], HOSTILE):
        m["name"] = name
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for _ in range(12):
        if (await api.post(f"/v1/campaigns/{cid}/duels")).status_code != 201:
            break
    files = (await api.get(f"/v1/campaigns/{cid}/export")).json()["files"]
    for name in ("matrix.csv", "ranking.csv"):
        rows = list(csv.reader(io.StringIO(files[name])))
        header, cells = rows[0], [cell for row in rows[1:] for cell in row]
        model_cells = {row[header.index("model")] for row in rows[1:]}
        assert model_cells == {"'" + n for n in HOSTILE}, (name, model_cells)
        for cell in cells:
            if cell.startswith(FORMULA_STARTS):
                float(cell)  # only a number may start with - or +: it was written as a number
    # the JSON files keep the names as they are
    assert {r["model"] for r in json.loads(files["ranking.json"])} == set(HOSTILE)


def test_reproduce_writes_its_csv_through_the_same_writer(tmp_path):
    from algorithms.research.reproduce import _write_csv

    path = tmp_path / "results.csv"
    _write_csv(path, [{"algorithm": "=HYPERLINK(1)", "cost": -1.5, "skip": "x"}], ["algorithm", "cost"])
    assert list(csv.reader(path.open(newline=""))) == [["algorithm", "cost"], ["'=HYPERLINK(1)", "-1.5"]]
