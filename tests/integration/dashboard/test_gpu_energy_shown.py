"""GPU-hours and energy beside cFLOP wherever a submission's numbers show (issue 46): the
leaderboard API, page and CSV, the submission API and ``nevis results``; a row measured without
a GPU says "no GPU" (null with its reason, never 0) and an estimated energy says so."""

from __future__ import annotations

import csv
import io
import json
import re

from fastapi.testclient import TestClient
from sqlalchemy import update
from typer.testing import CliRunner

from services.cli.main import app
from services.coordinator.crud import users
from services.core.config import get_settings
from services.dashboard.server import create_server_app
from services.store.db import transaction
from services.store.db.models import TaskResult
from services.store.db.models_coordinator import ScheduledSubmission
from services.store.runs.scores import rescore

NO_GPU = "no GPU: the host was given none"


def test_gpu_time_and_energy_are_shown_beside_cflop(seed_board, database_url, monkeypatch):
    settings, sessions, stream = seed_board(submissions=2, tasks=3, seed=3)
    cpu_only, on_gpu = stream.submission_ids
    with transaction(sessions) as session:
        session.execute(
            update(TaskResult)
            .where(TaskResult.submission_id == cpu_only)
            .values(gpu_note=NO_GPU, energy_kwh=0.001, energy_source="estimate")
        )
        session.execute(
            update(TaskResult)
            .where(TaskResult.submission_id == on_gpu)
            .values(gpu_seconds=1200.0, gpu_peak_memory_bytes=2 << 30, energy_kwh=0.5, energy_source="rapl+nvml")
        )
        rescore(session, submission_ids=[cpu_only, on_gpu])  # as a committing result does (scores.py)
        owner = users.create_user(session, name="owner", role="submitter")
        session.add_all([ScheduledSubmission(submission_id=i, user_id=owner.id) for i in (cpu_only, on_gpu)])
        _, secret = users.create_token(session, user=owner, label="t")
    auth = {"Authorization": f"Bearer {secret}"}
    with TestClient(create_server_app(settings), raise_server_exceptions=False) as client:
        rows = {r["submission_id"]: r for r in client.get("/v1/leaderboard", params={"limit": 100}).json()["items"]}
        assert (rows[cpu_only]["gpu_seconds"], rows[cpu_only]["gpu_note"]) == (None, NO_GPU)
        assert rows[cpu_only]["energy_kwh"] == 0.003 and rows[cpu_only]["energy_source"] == "estimate"
        assert rows[on_gpu]["gpu_seconds"] == 3600.0 and rows[on_gpu]["energy_source"] == "rapl+nvml"
        page = client.get("/").text
        row = re.search(rf'<tr[^>]*data-submission="{cpu_only}".*?</tr>', page, re.S).group(0)
        assert ">no GPU</span>" in row and "~0.003 kWh" in row
        row = re.search(rf'<tr[^>]*data-submission="{on_gpu}".*?</tr>', page, re.S).group(0)
        assert "1 GPU-h" in row and ">1.5 kWh" in row
        table = list(csv.DictReader(io.StringIO(client.get("/leaderboard.csv").text)))
        shown = {int(r["submission_id"]): r for r in table}
        assert shown[cpu_only]["gpu_seconds"] == "" and shown[cpu_only]["gpu_note"] == NO_GPU
        assert shown[cpu_only]["energy_source"] == "estimate" and float(shown[on_gpu]["gpu_seconds"]) == 3600.0
        detail = client.get(f"/v1/submissions/{cpu_only}", headers=auth).json()
        assert (detail["gpu_seconds"], detail["gpu_note"], detail["energy_source"]) == (None, NO_GPU, "estimate")
        assert {(t["gpu_seconds"], t["gpu_note"]) for t in detail["tasks"] if t["status"] == "committed"} == {
            (None, NO_GPU)
        }
        gpu_detail = client.get(f"/v1/submissions/{on_gpu}", headers=auth).json()
        assert gpu_detail["gpu_seconds"] == 3600.0 and gpu_detail["tasks"][0]["gpu_peak_memory_bytes"] == 2 << 30
    monkeypatch.setenv("NEVIS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    out = CliRunner().invoke(app, ["results", str(cpu_only)])
    assert out.exit_code == 0, out.output
    assert f"GPU = no GPU ({NO_GPU})" in out.output and "estimate = CPU-seconds x 10 W" in out.output
    doc = json.loads(CliRunner().invoke(app, ["results", str(on_gpu), "--json"]).output)
    assert doc["gpu_seconds"] == 3600.0 and doc["energy_kwh"] == 1.5
