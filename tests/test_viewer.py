"""``ikatkit view``: the viewer of the 2023 manual and automatic runs of test_crosscheck (real topics, qrels, NIST
PTKB qrels, passage texts from a real Lucene index of the 894 passages) and of the released 2025 interactive runs
with their rubrics and NIST's assessments (the fixture of tests/data/nist-assessments), read back from the HTML
and rendered by headless Chromium (skipped, saying why, where it is not installed)."""

from __future__ import annotations

import html
import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import IKAT_DATA
from test_crosscheck import CHROMIUM, TRACK, _cli, read_qrels, runs, trec_eval  # noqa: F401  # runs: a fixture

RELEASED = IKAT_DATA / "2025-released"
NIST = Path(__file__).parent / "data" / "nist-assessments" / "topic1-1.final"
NO_CHROMIUM = "headless Chromium is not installed (apt-get install chromium; .ci/run installs it): not rendered"


class Page(HTMLParser):
    """Turn sections (``data-key``) with the text of each run's column, and rows of the rankings by id."""

    def __init__(self) -> None:
        super().__init__()
        self.turns: dict[str, dict[str, list[str]]] = {}
        self.rows: dict[str, list[str]] = {}
        self.scripts: list[str] = []
        self._turn = self._run = self._row = None
        self._depth: list[str] = []
        self._script = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section" and "data-key" in attrs:
            self._turn = attrs["data-key"]
            self.turns[self._turn] = {}
        if tag == "div" and "data-run" in attrs:
            self._run = attrs["data-run"]
            self.turns[self._turn][self._run] = []
        if tag == "tr" and attrs.get("id"):
            self._row = attrs["id"]
            self.rows[self._row] = []
        self._script = tag == "script"

    def handle_endtag(self, tag):
        if tag == "tr":
            self._row = None
        if tag == "section":
            self._turn = self._run = None
        self._script = False

    def handle_data(self, data):
        if self._script:
            self.scripts.append(data)
        if self._turn and self._run:
            self.turns[self._turn][self._run].append(data)
        if self._row:
            self.rows[self._row].append(data)


def read_pages(out: Path) -> dict[str, Page]:
    pages = {}
    for path in sorted((out / "c").glob("*.html")):
        page = Page()
        page.feed(path.read_text(encoding="utf-8"))
        pages[path.stem] = page
    return pages


@pytest.fixture(scope="module")
def viewed(runs, passages_index, tmp_path_factory) -> Path:  # noqa: F811  # the imported fixture
    """``ikatkit view manual automatic`` over the 2023 test year, texts from the Lucene index of 894 passages."""
    out = tmp_path_factory.mktemp("viewer") / "view"
    code, printed, err = _cli(["view", *(f"{n}={p}" for n, p in runs.paths.items()), "--out", str(out),
                               "--topics", str(runs.year / "test_topics.json"), "--qrels", str(runs.year / "qrels.txt"),
                               "--ptkb-qrels", str(runs.year / "ptkb_qrels.nist.txt"), "--index", str(passages_index)])
    assert code == 0, err
    assert printed == f"viewer: {out / 'index.html'}\n"
    return out


def test_every_turn_with_grades_texts_and_ptkb(runs, viewed, passages_jsonl):  # noqa: F811
    """Every topic turn on its conversation's page, each run's column (the manual run says where it has no answer),
    the top 10 of each ranking with the qrels' grade, the index's text of every passage it holds, PTKB grades."""
    from ikatkit.topics import load_topics

    topics = load_topics(runs.year / "test_topics.json")
    pages = read_pages(viewed)
    assert set(pages) == {c.id for c in topics.conversations}
    shown = {key: page.turns[key] for page in pages.values() for key in page.turns}
    assert sorted(shown) == sorted(t.qid for t in topics)
    texts = {r["id"]: r["contents"] for r in map(json.loads, passages_jsonl.read_text().splitlines())}
    with_text = 0
    for name, ranking in runs.rankings.items():
        number = list(runs.rankings).index(name)
        for qid, docs in ranking.items():
            top = sorted(docs, key=lambda d: -docs[d])[:10]
            for rank, pid in enumerate(top, start=1):
                conversation, _, turn = qid.rpartition("_")
                raw = pages[conversation].rows[f"r{number}-t{turn}-{pid}"]
                cells = [c.strip() for c in raw if c.strip() and c != "*"]
                grade = runs.qrels.get(qid, {}).get(pid)
                assert cells[:2] == [str(rank), pid] and (cells[3] == str(grade) if grade is not None else True)
                if pid in texts:
                    with_text += 1
                    assert texts[pid][:220] in "".join(raw) and texts[pid][220:] in "".join(raw), pid
    assert with_text > 100  # the 894 passages are those the topics cite: many are in the reference run's top 10
    missing = [q for q in shown if q not in runs.rankings["manual"]]
    assert missing and all("no answer in this run" in "".join(shown[q]["manual"]) for q in missing)
    # PTKB: the manual run uses the gold statements; NIST's grade follows each statement
    qid = next(q for q in runs.ptkb["manual"] if runs.ptkb["manual"][q] and q in runs.ptkb_qrels)
    page = (viewed / "c" / f"{qid.rpartition('_')[0]}.html").read_text()
    section = page.split(f'id="t{qid.rpartition("_")[2]}"')[1].split("</section>")[0]
    manual = section.split('data-run="manual"')[1].split('data-run="automatic"')[0]
    marked = re.findall(r'<li class="on">(.*?) (?:<span class="g\d">(\d)</span>)?</li>', manual)
    statements = topics.conversation_of(qid).ptkb
    assert [html.unescape(s) for s, _ in marked] == [statements[k] for k in statements if k in runs.ptkb["manual"][qid]]
    assert [g for _, g in marked] == [str(runs.ptkb_qrels[qid][k]) if k in runs.ptkb_qrels[qid] else ""
                                      for k in statements if k in runs.ptkb["manual"][qid]]


def test_two_runs_side_by_side(runs, viewed):  # noqa: F811
    """Per turn: nDCG@5 of both runs and their delta as pytrec_eval computes them, the judged relevant passages only
    one run ranks; the overview's turns where they differ most are those of the largest |delta|."""
    per_turn = {n: trec_eval(runs.qrels, runs.rankings[n], {"nDCG@3": TRACK["nDCG@3"]}) for n in runs.rankings}
    both = [q for q in per_turn["manual"] if q in per_turn["automatic"]]
    qid = max(both, key=lambda q: abs(per_turn["automatic"][q]["nDCG@3"] - per_turn["manual"][q]["nDCG@3"]))
    delta = per_turn["automatic"][qid]["nDCG@3"] - per_turn["manual"][qid]["nDCG@3"]
    page = (viewed / "c" / f"{qid.rpartition('_')[0]}.html").read_text()
    section = page.split(f'id="t{qid.rpartition("_")[2]}"')[1].split("</section>")[0]
    assert f"nDCG@3 {delta:+.4f}" in section
    assert f'data-delta="{delta}"' in page.split(f'id="t{qid.rpartition("_")[2]}"')[1][:200]
    index = (viewed / "index.html").read_text()
    first = re.search(r'<table class=sortable id=differ>.*?<a href="([^"]+)">([^<]+)</a>', index, re.S)
    assert first.group(2) == qid and first.group(1) == f"c/{qid.rpartition('_')[0]}.html#t{qid.rpartition('_')[2]}"
    # the manual run leaves out turns: on every judged turn both rank, the found/missed sets are computed by hand
    relevant = {pid for pid, g in runs.qrels[qid].items() if g >= 2}
    manual, automatic = set(runs.rankings["manual"][qid]), set(runs.rankings["automatic"][qid])
    counts = [re.search(rf"only {n} ranks \((\d+)\)", section) for n in ("manual", "automatic")]
    assert [int(c.group(1)) if c else 0 for c in counts] == [len(relevant & manual - automatic),
                                                              len(relevant & automatic - manual)]


def test_rankings_beyond_ten_are_folded_into_the_page_json(runs, viewed):  # noqa: F811
    """Rows 11 and on are in the page's JSON, with their grades, and nowhere in the HTML."""
    qid = next(q for q in runs.rankings["automatic"] if len(runs.rankings["automatic"][q]) > 10 and q in runs.qrels)
    page = Page()
    page.feed((viewed / "c" / f"{qid.rpartition('_')[0]}.html").read_text())
    rest = json.loads(page.scripts[0] if page.scripts[0].strip().startswith("{") else
                      next(s for s in page.scripts if s.strip().startswith("{")))
    ranking = sorted(runs.rankings["automatic"][qid], key=lambda d: -runs.rankings["automatic"][qid][d])
    rows = rest[f"{qid}|1"]
    assert [r[1] for r in rows] == ranking[10:] and [r[0] for r in rows] == list(range(11, len(ranking) + 1))
    assert [r[3] for r in rows] == [runs.qrels[qid].get(d) for d in ranking[10:]]
    assert not any(k.startswith(f"r1-t{qid.rpartition('_')[2]}-{ranking[10]}") for k in page.rows)


def test_run_text_is_escaped_and_nothing_written_outside_out(tmp_path):
    """A response, a PTKB statement and passage ids with markup show as text: no script of the run runs, not even
    one that closes the page's JSON (``</script>``); the viewer's folder holds its pages only."""
    from ikatkit.runs.io import write_run
    from ikatkit.runs.model import PassageRef, PtkbRef, Response, Run, TurnResult

    evil = "<script>window.pwned = 1</script><b>bold</b> & [1]"
    passages = [PassageRef(f"clueweb22-en0000-00-0000{i}:{i}", 20.0 - i, "", i == 0) for i in range(12)]
    passages.append(PassageRef("x</script><script>window.pwned=2</script>:1", 1.0))
    run = Run("evil", "automatic", [TurnResult("1-1_1", [Response(1, evil, passages, [PtkbRef("1", 1.0, evil)])])])
    runs_dir = tmp_path / "runs"
    runs_dir.mkdir()
    write_run(run, runs_dir / "evil.json", "2023")
    before = sorted(p.name for p in runs_dir.iterdir())
    out = tmp_path / "view"
    code, _, err = _cli(["view", str(runs_dir / "evil.json"), "--out", str(out)])
    assert code == 0, err
    assert sorted(p.name for p in runs_dir.iterdir()) == before
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["c", "c/1-1.html", "index.html"]
    page = (out / "c" / "1-1.html").read_text()
    assert "<script>window.pwned" not in page and "</script><script>" not in page
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt; &amp; " in page
    assert '<a class=cite href="#r0-t1-clueweb22-en0000-00-00000:0">[1]</a>' in page  # [1]: the first citation
    if CHROMIUM is None:
        pytest.skip(NO_CHROMIUM)
    found, errors = render(out / "c" / "1-1.html", "document.querySelector('button.more').click();")
    assert found["pwned"] is None and not errors, (found, errors)
    assert evil in found["response"] and found["rows"] == 13 and found["last"].startswith("x</script>")


PROBE = """<script>
window.__errors = [];
window.addEventListener("error", function(e){ window.__errors.push(String(e.message)); });
</script>"""
CHECK = """<script>
document.addEventListener("DOMContentLoaded", function(){ try { %s } catch (e) { window.__errors.push(String(e)); }
  var body = document.body.getBoundingClientRect().right;
  var rows = document.querySelectorAll("table.rank tbody tr");
  var out = {pwned: window.pwned === undefined ? null : window.pwned, errors: window.__errors,
    page: document.documentElement.scrollWidth, view: window.innerWidth,
    outside: [...document.querySelectorAll("section, table, .col")]
      .filter(e => e.getBoundingClientRect().right > body + 1 && !e.closest(".box")).length,
    sections: [...document.querySelectorAll("section.turn")].map(s => s.dataset.key),
    current: [...document.querySelectorAll("section.turn.current")].map(s => s.dataset.key),
    hidden: document.querySelectorAll("section.turn.hidden").length,
    response: (document.querySelector(".response") || {}).textContent || "", rows: rows.length,
    last: rows.length ? rows[rows.length - 1].cells[1].textContent : "",
    cols: [...document.querySelectorAll("section.turn:first-of-type .col h3")].map(h => h.textContent)};
  var pre = document.createElement("pre"); pre.id = "probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def render(page: Path, actions: str = "") -> tuple[dict, list[str]]:
    """``page`` in headless Chromium at 1400 px with a probe that runs ``actions`` (JavaScript) once the page's own
    script ran, then reports what it finds into the DOM; and the console errors Chromium logged."""
    probe = page.with_name("probe-" + page.name)
    text = page.read_text(encoding="utf-8")
    probe.write_text(text.replace("<body>", "<body>" + PROBE, 1).replace("</body>", CHECK % actions + "</body>"))
    try:
        done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               f"--user-data-dir={page.parent / '.chromium'}", "--window-size=1400,900",
                               "--enable-logging=stderr", "--v=0", "--dump-dom", probe.as_uri()],
                              capture_output=True, text=True, timeout=120)
    finally:
        probe.unlink()
    found = json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S).group(1)))
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return found, console + found["errors"]


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_pages_in_chromium(runs, viewed):  # noqa: F811
    """The overview and a conversation of the 2023 viewer in Chromium: no console error, within 1400 px, every turn,
    both runs side by side, "show more" draws the folded rows, j moves to the next turn, the filter hides turns."""
    found, errors = render(viewed / "index.html")
    assert not errors and found["page"] <= found["view"] == 1400, (found, errors)
    qids = [q for q in runs.rankings["automatic"] if q.startswith("10-1_")]
    actions = ("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'j'}));"
               "document.dispatchEvent(new KeyboardEvent('keydown', {key: 'j'}));"
               "document.querySelectorAll('button.more').forEach(b => b.click());"
               "var f = document.getElementById('filter'); f.value = '0.5'; f.dispatchEvent(new Event('change'));")
    found, errors = render(viewed / "c" / "10-1.html", actions)
    assert not errors and found["page"] <= found["view"] and found["outside"] == 0, (found, errors)
    assert found["sections"] == qids and found["current"] == [qids[1]] and found["cols"] == ["manual", "automatic"]
    assert found["rows"] == sum(len(runs.rankings[n].get(q, {})) for n in runs.rankings for q in qids)
    deltas = {n: trec_eval(runs.qrels, runs.rankings[n], {"nDCG@3": TRACK["nDCG@3"]}) for n in runs.rankings}
    big = [q for q in qids if q in deltas["manual"] and q in deltas["automatic"]
           and abs(deltas["automatic"][q]["nDCG@3"] - deltas["manual"][q]["nDCG@3"]) >= 0.5]
    assert found["hidden"] == len(qids) - len(big)


@pytest.fixture(scope="module")
def interactive(tmp_path_factory) -> tuple[Path, Path]:
    """The viewer of the two released 2025 interactive runs and of NIST's assessed run (its conversation 1-1 as the
    fixture records it) with the rubrics, the 2025 topics, NIST's assessments and the forms; and the run folder."""
    if not (RELEASED / "rubrics.json").exists():
        pytest.skip(f"the 2025 release not found at {RELEASED} (set IKAT_DATA)")
    folder = tmp_path_factory.mktemp("interactive")
    entry = json.loads(NIST.read_text())[0]
    rows = [{"metadata": {"team_id": "cfda", "run_id": entry["runtag"], "type": "interactive", "description": "",
                          "track_persona": 1, "topic_id": f"1-1_{r['turn']}"},
             "responses": [r["response"]], "references": r["response"].get("citations") or {}}
            for r in entry["responses"]]
    assessed = folder / f"{entry['runtag']}.jsonl"
    assessed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    from ikatkit.evaluate.assessments import read_assessments, read_forms
    from ikatkit.evaluate.dialogue_judge import judged_records

    units = read_assessments([NIST], read_forms([RELEASED / "guidelines"]))
    judge = folder / "judge.jsonl"  # a judge that rates every dimension 2 but personalization 3
    judge.write_text("".join(json.dumps(r) + "\n" for r in judged_records(
        units, [{q: 3 if q == "personalization" else 2 for q in u.values} for u in units], "test-judge")))
    out = folder / "view"
    code, _, err = _cli(["view", *(str(p) for p in sorted((RELEASED / "interactive-runs").glob("*.jsonl"))),
                         str(assessed), "--out", str(out), "--rubrics", str(RELEASED / "rubrics.json"),
                         "--topics", str(RELEASED / "2025_test_topics.json"), "--assessments", str(NIST),
                         "--forms", str(RELEASED / "guidelines"), "--judged", str(judge)])
    assert code == 0, err
    return out, assessed


def test_interactive_runs_rubrics_scores_and_nist_labels(interactive):
    """Every answered user turn of the released runs (the farewell rows are where the user left), the simulated
    user's rubric and 0-5 score, SimRubricScore per conversation as the simulator measure computes it, NIST's
    dialogue and fragment labels of the assessed run."""
    from ikatkit.evaluate.responses.providers.simulator import sim_rubric_scores
    from ikatkit.evaluate.responses.rubrics import read_rubrics

    out, assessed = interactive
    pages = read_pages(out)
    rubrics = read_rubrics(RELEASED / "rubrics.json")
    index = (out / "index.html").read_text()
    for path in sorted((RELEASED / "interactive-runs").glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        name = path.stem
        answered = [r for r in rows if r["responses"][0]["text"] is not None]
        shown = {k: t[name] for p in pages.values() for k, t in p.turns.items()
                 if "no answer in this run" not in "".join(t[name])}
        assert sorted(shown) == sorted(r["metadata"]["topic_id"] for r in answered)
        for r in answered[:40]:
            first = r["responses"][0]
            text = html.unescape("".join(shown[r["metadata"]["topic_id"]]))
            assert " ".join(first["user_utterance"].split()) in " ".join(text.split())
            if first["user_rubrik_score"] is not None:
                assert f"the simulated user's score {first['user_rubrik_score']}/5" in text
        judged = {r["metadata"]["topic_id"]: (r["responses"][0]["user_rubrik"], r["responses"][0]["user_rubrik_score"])
                  for r in answered}
        for conversation, row in sim_rubric_scores(judged, rubrics)[0].items():
            assert re.search(rf'<a href="c/{conversation}.html">{conversation}</a>.*?{row["score"]:.4f}', index, re.S)
        farewells = [r for r in rows if r["responses"][0]["text"] is None]
        for r in farewells[:3]:
            conversation = r["metadata"]["topic_id"].rpartition("_")[0]
            page = (out / "c" / f"{conversation}.html").read_text()
            assert f"{name}: the simulated user left after " in page
    page = (out / "c" / "1-1.html").read_text()
    section = page.split('data-run="' + assessed.stem)[0]
    assert "the dialogue&#39;s assessment" in page or "the dialogue's assessment" in page
    assert "Purely Reactive" in page and "Incorrectly Personalized" in page
    # NIST's label, its value on the form (Incorrectly Personalized: 2 of 5) and the judge's value
    assert re.search(r"<td>personalization</td><td class=text>Incorrectly Personalized</td><td class=n>2</td>"
                     r"<td class=n>3</td>", page)
    turn1 = page.split('id="t1"')[1].split("</section>")[0].split(f'data-run="{assessed.stem}"')[1]
    assert "Functional Tool" in turn1 and "ikat-fragment-v1, turns 1" in turn1
    assert section


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_interactive_page_in_chromium(interactive):
    out, assessed = interactive
    found, errors = render(out / "c" / "1-1.html")
    assert not errors and found["page"] <= found["view"] and found["outside"] == 0, (found, errors)
    names = sorted(p.stem for p in (RELEASED / "interactive-runs").glob("*.jsonl"))
    assert found["cols"] == [*names, assessed.stem]


WORDS = """<script>
document.addEventListener("DOMContentLoaded", function(){
  var broken = [], body = document.body.getBoundingClientRect().right;
  document.querySelectorAll("table:first-of-type td").forEach(function(td){
    var walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT), node;
    while ((node = walker.nextNode())) {
      var words = /[^\\s\\/-]+/g, m;  // a line may break at a space, after a slash or a hyphen: nowhere else
      while ((m = words.exec(node.data))) {
        var range = document.createRange(); range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
        var tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
  });
  var tables = [...document.querySelectorAll("table")]
    .map(t => [...t.rows].map(r => [...r.cells].map(c => c.textContent)));
  var pre = document.createElement("pre"); pre.id = "probe";
  var scrolled = [...document.querySelectorAll(".box")].filter(b => b.scrollWidth > b.clientWidth + 1)
    .map(b => b.querySelector("tr").textContent);  // tables wider than the page: their box scrolls sideways
  pre.textContent = JSON.stringify({broken: broken, tables: tables, page: document.documentElement.scrollWidth,
                                    view: window.innerWidth, areas: document.querySelectorAll("a.area").length,
                                    scrolled: scrolled});
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_report_of_two_runs_in_chromium(runs, viewed, tmp_path):  # noqa: F811
    """The report of two 2023 runs, each in the folder `ikatkit run` writes (its manifest.json beside it): the
    configs' descriptions in the runs table, no word broken over two lines (a break after a space, a slash or a
    hyphen only) at 1400 px and in a narrow window (700 px),
    the compact table (runs x the chosen measures, marks), every plot point linked and each turn to the viewer."""
    paths = {}
    for name, path in runs.paths.items():
        folder = tmp_path / "runs" / f"a-rather-long-folder-name-for-the-{name}-run-of-the-2023-test-topics"
        folder.mkdir(parents=True)
        paths[name] = folder / path.name
        paths[name].write_bytes(path.read_bytes())
        (folder / "manifest.json").write_text(json.dumps({
            "run_name": name, "files": {"run": path.name, "trec": f"{name}.trec"},
            "config": {"name": name, "description": f"The {name} pipeline: BM25 over the 894 passages, reranked "
                                                     "by a cross-encoder, with a rewriter of the utterance."}}))
    out = tmp_path / "report"
    measures = ["nDCG@3", "nDCG@5", "R(rel=2)@20"]
    code, _, err = _cli(["report", *(f"{n}={p}" for n, p in paths.items()), "--qrels", str(runs.year / "qrels.txt"),
                         "--measures", *measures, "--out", str(out), "--viewer", str(viewed)])
    assert code == 0, err
    page = (out / "report.html").read_text()
    for width in (1400, 700):
        probe = out / f"probe-{width}.html"
        probe.write_text(page.replace("</body>", WORDS + "</body>"))
        dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},900",
                              f"--user-data-dir={tmp_path / 'chromium'}", "--dump-dom", probe.as_uri()],
                             capture_output=True, text=True, timeout=120).stdout
        found = json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1)))
        assert found["broken"] == [] and found["page"] <= found["view"], found["broken"]
        if width == 1400:  # the runs table whole, its judged@20 in sight (no sideways scrolling)
            assert not [head for head in found["scrolled"] if head.startswith("runtypedescription")], found
    runs_table = found["tables"][0]
    described = {row[0]: row[2] for row in runs_table[1:]}
    assert described == {n: f"The {n} pipeline: BM25 over the 894 passages, reranked by a cross-encoder, with a "
                            "rewriter of the utterance." for n in runs.paths}
    compact = found["tables"][1]
    assert compact[0] == ["run", *measures, "judged@10"] and [r[0] for r in compact[1:]] == list(runs.paths)
    per_turn = {n: trec_eval(runs.qrels, runs.rankings[n], {m: TRACK[m] for m in measures}) for n in runs.paths}
    common = [q for q in per_turn["manual"] if q in per_turn["automatic"]]
    mean = sum(per_turn["automatic"][q]["nDCG@5"] for q in common) / len(common)
    assert compact[2][2].rstrip("\u2020\u2021") == f"{mean:.4f}"
    # links: each plot's turn positions and conversations, and every turn of the turn table to its viewer page
    positions = {int(q.rpartition("_")[2]) for q in common}
    conversations = {q.rpartition("_")[0] for q in common}
    assert found["areas"] == len(measures) * (max(positions) - min(positions) + 1 + len(conversations))
    links = re.findall(r'<a href="([^"]+)">(\d+-\d+_\d+)</a>', page)
    assert sorted(q for _, q in links) == sorted(common)
    for url, qid in links[:20]:
        target, _, anchor = url.partition("#")
        assert f'id="{anchor}"' in (out / target).resolve().read_text() and anchor == f"t{qid.rpartition('_')[2]}"


def test_2026_users_and_ikatkit_notes(tmp_path):
    """2026 rows: one topic played by two users is two pages (the user's id shown); the run folder of `ikatkit
    interactive` gives the description, the manifest's notes and each turn's notes (a cut response, a guard's
    refusal); the farewell row is where the user left."""
    def row(qid: str, user: str, text: str | None, score: int | None = 4) -> dict:
        return {"metadata": {"team_id": "t", "run_id": "r26", "type": "interactive", "track_persona": 1,
                             "user_id": user, "topic_id": qid},
                "responses": [{"rank": 1, "user_utterance": f"{user} asks {qid}", "user_rubrik": "Which diet?",
                               "user_rubrik_score": score, "text": text, "ptkb_provenance": [],
                               "citations": {"clueweb22-en0001-00-00001:1": 2.0} if text else None}],
                "references": {"clueweb22-en0001-00-00001:1": 2.0} if text else {}}
    folder = tmp_path / "runs" / "r26"
    (folder / "turns").mkdir(parents=True)
    rows = [row("1-1_1", "u1", "First answer."), row("1-1_2", "u1", "Second answer.", 5),
            row("1-1_3", "u1", None, None), row("1-1_1", "u2", "Another user's answer.")]
    (folder / "r26.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "manifest.json").write_text(json.dumps({
        "run_id": "r26", "description": "BM25 and a small LLM", "dump": {"file": "r26.jsonl"},
        "notes": {"response cut at a sentence boundary to the API's 250 tokens": 1}, "guarded_llm_outputs": {}}))
    (folder / "turns" / "1-1_2.json").write_text(json.dumps({"record": {
        "qid": "1-1_2", "user_id": "u1", "notes": ["response cut at a sentence boundary to the API's 250 tokens"],
        "rejected": {"rewrite": "empty rewrite"}}}))
    out = tmp_path / "view"
    code, _, err = _cli(["view", str(folder / "r26.jsonl"), "--out", str(out)])
    assert code == 0, err
    assert sorted(p.name for p in (out / "c").iterdir()) == ["u1_1-1.html", "u2_1-1.html"]
    pages = read_pages(out)
    assert list(pages["u1_1-1"].turns) == ["u1/1-1_1", "u1/1-1_2"] and list(pages["u2_1-1"].turns) == ["u2/1-1_1"]
    second = html.unescape("".join(pages["u1_1-1"].turns["u1/1-1_2"]["r26"]))
    assert "user u1:" in second and "u1 asks 1-1_2" in second and "the simulated user's score 5/5" in second
    assert "ikatkit: response cut at a sentence boundary to the API's 250 tokens" in second
    assert "ikatkit: rewrite: LLM output refused by its guard (empty rewrite)" in second
    assert "ikatkit" not in "".join(pages["u1_1-1"].turns["u1/1-1_1"]["r26"])
    page = html.unescape((out / "c" / "u1_1-1.html").read_text())
    assert "r26: the simulated user left after u1/1-1_2, saying \u201cu1 asks 1-1_3\u201d." in page
    index = html.unescape((out / "index.html").read_text())
    assert "BM25 and a small LLM" in index
    assert "response cut at a sentence boundary to the API's 250 tokens \u00d71" in index
    assert re.search(r"<td>u1</td>.*<td>u2</td>", index, re.S)


def test_2026_user_types_beside_the_users(tmp_path):
    """The type of each 2026 user: from the dump's user_meta.user_type, or from --user-types (as eval takes it),
    beside the user's id on its page and in the overview."""
    def row(qid: str, user: str, meta: dict) -> dict:
        return {"metadata": {"run_id": "r26", "user_id": user, "topic_id": qid},  # the API's dump
                "responses": [{"rank": 1, "user_utterance": f"{user} asks", "user_meta": meta,
                               "assistant_text": "An answer.",
                               "assistant_citations": {"clueweb22-en0001-00-00001:1": 2.0}, "assistant_meta": {}}]}
    noted, mapped = "f3333f5c-0001", "f3333f5c-0002"
    run = tmp_path / "r26.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in [row("1-1_1", noted, {"user_type": "u1"}),
                                                          row("1-1_1", mapped, {})]))
    types = tmp_path / "types.json"
    types.write_text(json.dumps({mapped: "u2"}))
    out = tmp_path / "view"
    code, _, err = _cli(["view", str(run), "--out", str(out), "--user-types", str(types)])
    assert code == 0, err
    pages = read_pages(out)
    assert f"user {noted} (u1):" in "".join(pages[f"{noted}_1-1"].turns[f"{noted}/1-1_1"]["r26"])
    assert f"user {mapped} (u2):" in "".join(pages[f"{mapped}_1-1"].turns[f"{mapped}/1-1_1"]["r26"])
    index = (out / "index.html").read_text()
    assert "<th>user type</th>" in index
    assert re.search(rf"<td>{noted}</td><td>u1</td>.*<td>{mapped}</td><td>u2</td>", index, re.S)


def test_top_bar_found_line_and_unjudged_marks(runs, viewed):  # noqa: F811
    """The overview's top bar reads as words; a turn where neither run alone ranks a relevant passage has no
    'relevant passages only' line; a passage without a grade in the qrels is marked unjudged, one graded 0 shows 0."""
    class Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.nav, self._in = [], False

        def handle_starttag(self, tag, attrs):
            self._in = self._in or tag == "nav"

        def handle_endtag(self, tag):
            self._in = self._in and tag != "nav"

        def handle_data(self, data):
            if self._in:
                self.nav.append(data)

    top = Text()
    top.feed((viewed / "index.html").read_text())
    assert " ".join("".join(top.nav).split()).startswith("ikatkit viewer first conversation")
    pages = {path.stem: path.read_text() for path in (viewed / "c").glob("*.html")}
    sections = {key: section for text in pages.values() for key, section in
                re.findall(r'<section class=turn id="t\d+" data-key="([^"]+)".*?>(.*?)</section>', text, re.S)}
    assert [key for key, section in sections.items() if "ranks (0)" in section] == []
    one_sided = []
    for qid in sections:
        relevant = {pid for pid, g in runs.qrels.get(qid, {}).items() if g >= 2}
        sets = [set(runs.rankings[n].get(qid, [])) for n in ("manual", "automatic")]
        shown = "relevant passages only" in sections[qid]
        assert shown == bool(relevant & (sets[0] ^ sets[1])), qid
        one_sided += [qid] * shown
    assert one_sided  # both kinds of turn occur
    marks = {"unjudged": 0, "zero": 0}
    for qid, section in sections.items():
        for pid, cell in re.findall(r'<tr id="r0-t\d+-([^"]+)".*?</td>\s*<td>[^<]*</td><td class=n>[^<]*</td>'
                                    r'<td class=n>(.*?)</td>', section, re.S):
            grade = runs.qrels.get(qid, {}).get(pid)
            if grade is None:
                assert "class=unjudged" in cell, (qid, pid)
                marks["unjudged"] += 1
            else:
                assert f">{grade}</span>" in cell and "unjudged" not in cell, (qid, pid)
                marks["zero"] += grade == 0
    assert marks["unjudged"] and marks["zero"]


def test_bad_inputs_are_one_clear_error(tmp_path, capsys):
    """A missing run, assessments without their forms, a judge without assessments, --out a file: one line each."""
    from ikatkit.cli import main

    run = Path(__file__).parent / "data" / "organizers_2023" / "sample_run.json"
    (tmp_path / "file").write_text("")
    cases = {("view", str(tmp_path / "nothing.json"), "--out", str(tmp_path / "v")): "run file not found",
             ("view", str(run), "--out", str(tmp_path / "v"), "--assessments", str(NIST)): "need the assessors' forms",
             ("view", str(run), "--out", str(tmp_path / "v"), "--judged", str(NIST)): "pass --assessments too",
             ("view", str(run), "--out", str(tmp_path / "file")): "--out is a file",
             ("view", str(run), "--out", str(tmp_path / "v"), "--measures", "nDCG@x"): "unknown measure"}
    for args, message in cases.items():
        assert main(list(args)) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2, err
    assert not (tmp_path / "v").exists()
