"""``python -m visgym.bench step``: the figures it prints and writes (env-steps/s per batch size,
the copy ceiling, the frame bytes an env-step changes), on a tiny run."""
from __future__ import annotations

import json

from visgym.bench.__main__ import main


def test_bench_step_reports_speed_and_changed_bytes(tmp_path, capsys):
    out = tmp_path / "step.json"
    assert main(["step", "--env", "maze_2d/easy", "--batch", "1,4", "--seconds", "0.05",
                 "--repeat", "2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [r["batch"] for r in report["results"]] == [1, 4]
    height, width = report["results"][0]["frame_shape"][:2]
    for r in report["results"]:
        assert r["env_steps_per_s"] > 0 and r["step_call_us"] > 0
        # Moves redraw the agent: frames change, by less than a whole frame per env-step.
        assert 0 < r["changed_bytes_per_env_step"] <= height * width * 3
        assert abs(r["changed_gb_per_s"] - r["changed_bytes_per_env_step"]
                   * r["env_steps_per_s"] / 1e9) < 1e-9
    printed = capsys.readouterr().out
    assert "best of 2" in printed and "KB changed" in printed
