"""The README's GPU speed figures are generated from the recorded GPU result, never typed."""

from __future__ import annotations

import json

from bench import readme_speed


def test_readme_gpu_section_is_what_the_script_writes():
    readme = (readme_speed.ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_speed.rewrite(readme, readme_speed.render(*readme_speed.newest_result())) == readme


def test_a_changed_result_changes_the_section(tmp_path):
    path, report = readme_speed.newest_result()
    block = readme_speed.render(path, report)
    report = json.loads(json.dumps(report))
    report["inference"]["modes"]["eager_bf16"]["words_per_s"] = 12_345.0
    changed = readme_speed.render(path, report)
    assert "12,345 words/s" in changed and "misses the 100,000 target" in changed and changed != block
