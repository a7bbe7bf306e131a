"""The Gantt chart of a run: file names, and a picture of the documented layout."""

from __future__ import annotations

import matplotlib.image as mpimg

from crius_gym.eval.gantt import gantt_file_name, plot_gantt
from crius_gym.policies.registry import make_policy
from crius_gym.scenarios import load_scenario


def test_file_names_are_safe():
    assert gantt_file_name("crius") == "gantt_crius.png"
    assert gantt_file_name("ppo:run/best@1.5") == "gantt_ppo_run_best_1.5.png"


def test_a_run_is_drawn_with_one_panel_per_gpu_type(tmp_path):
    sc = load_scenario("tiny")
    result = sc.make_simulator().run(sc.synthetic_trace("test", 0), make_policy("crius"))
    path = tmp_path / "g.png"
    plot_gantt(result, sc.cluster, path, "caption", "tiny")
    image = mpimg.imread(path)
    assert image.shape[1] == 1200 and image.shape[2] == 4  # 10 in at 120 dpi, RGBA
    assert image.std() > 0.1  # bars were drawn, not a blank canvas
