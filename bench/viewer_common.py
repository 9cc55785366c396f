"""Helpers of the viewer's benchmark and screenshots: the 894 real passages, runs made from real data, Chromium."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    found = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if found is None:
        raise SystemExit("headless Chromium is not installed: apt-get install -y chromium")
    return found


def browse(url: str, *flags: str, width: int = 1400, height: int = 900) -> subprocess.CompletedProcess:
    """Chromium headless on ``url`` with a fresh profile (``flags``: --screenshot=..., --dump-dom ...)."""
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                               f"--window-size={width},{height}", *flags, url],
                              capture_output=True, text=True, timeout=300)


def runs_2023(data: Path, out: Path) -> dict[str, Path]:
    """Two official 2023 runs of the test topics from the SPLADE reference run: ``automatic`` its ranking, ``manual``
    its top 10 reversed and the gold PTKB statements; each response the canonical response's first 40 words with
    citation markers [1]-[3] (the top 3 passages cited)."""
    from ikatkit.runs.io import write_run
    from ikatkit.runs.model import PassageRef, PtkbRef, Response, Run, TurnResult
    from ikatkit.topics import load_topics

    topics = load_topics(data / "2023" / "test_topics.json")
    reference = json.loads((data / "2023" / "reference_run" / "splade_deberta_run.json").read_text())
    paths = {}
    for name in ("manual", "automatic"):
        run = Run(name, name, [], 2023, "bench")
        for turn in topics:
            order = sorted(reference.get(turn.qid, {}), key=lambda d: -reference[turn.qid][d])
            order = order[:10][::-1] + order[10:] if name == "manual" else order
            passages = [PassageRef(d, float(len(order) - i), "", i < 3) for i, d in enumerate(order)]
            words = (turn.response or "No answer.").split()[:40]
            text = " ".join(words[:15]) + " [1] " + " ".join(words[15:30]) + " [2][3] " + " ".join(words[30:])
            ptkb = topics.conversation_of(turn.qid).ptkb
            keys = list(turn.ptkb_provenance) if name == "manual" else list(ptkb)[:2]
            run.turns.append(TurnResult(turn.qid, [Response(1, text, passages or [PassageRef(
                "clueweb22-en0000-00-00000:0", 1.0, "", True)], [PtkbRef(k, 1.0, ptkb[k]) for k in keys])]))
        paths[name] = out / f"{name}.json"
        write_run(run, paths[name], "2023")
    return paths


def big_run(data: Path, out: Path, name: str, seed: int, references: int = 1000) -> Path:
    """A 2025 run over the 188 turns of the 2025 test topics with ``references`` passages a turn: the 894 real
    passages (shuffled by ``seed``) padded with made-up ids, five of them cited by a response of about 200 words."""
    from ikatkit.topics import load_topics

    topics = load_topics(data / "2025-released" / "2025_test_topics.json")
    real = [json.loads(line)["id"] for line in (out / "passages.jsonl").read_text().splitlines()]
    rng = random.Random(seed)
    lines = []
    for turn in topics:
        ids = rng.sample(real, len(real)) + [f"clueweb22-en9999-{i // 100000:02d}-{i % 100000:05d}:{i % 7}"
                                             for i in range(references - len(real))]
        ids = ids[:references]
        scores = {pid: round(100.0 - i * 0.05, 4) for i, pid in enumerate(ids)}
        words = " ".join(rng.choice(("diet", "protein", "train", "ticket", "runner", "budget", "phone"))
                         for _ in range(200))
        text = f"{words[:400]} [1] {words[400:800]} [2] {words[800:]} [3][4][5]"
        lines.append({"metadata": {"team_id": "bench", "run_id": name, "run_type": "automatic"},
                      "turn_id": turn.qid, "references": scores,
                      "responses": [{"rank": 1, "text": text, "citations": {pid: scores[pid] for pid in ids[:5]},
                                     "ptkb_provenance": []}]})
    path = out / f"{name}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path
