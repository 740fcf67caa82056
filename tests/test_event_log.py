"""events.jsonl is read strictly: a line that is not an event is an error naming the file and the line;
only a last line cut short (a process killed mid-write) is tolerated, with a warning."""

import json
import warnings

import pytest

from goodputlab.engine.api import load_run
from goodputlab.measure.events import EventLogError, EventLogWarning, EventTail, read_events
from goodputlab.measure.ledger import build_ledger

GOOD = [
    {"t": 0.0, "attempt": 0, "step": None, "kind": "start"},
    {"t": 0.1, "attempt": 0, "step": None, "kind": "spawn"},
    {"t": 0.5, "attempt": 0, "step": 0, "kind": "compute"},
    {"t": 0.6, "attempt": 0, "step": 0, "kind": "step_end", "loss": 4.1, "samples": [3, 1]},
    {"t": 0.7, "attempt": 0, "step": None, "kind": "end", "completed": True, "reason": "completed", "resume_step": 1},
]


GOOD_SUMMARY = {
    "goodput": 0.1, "wall_s": 0.7, "buckets": {"productive": 0.07}, "completed": True, "config": {"steps": 1},
    "failures": 0, "checkpoints": 0, "steps_completed": 1, "steps_executed": 1,
}  # fmt: skip


def write_log(path, lines: list[bytes]):
    path.write_bytes(b"".join(lines))
    return path


def good_lines():
    return [json.dumps(e).encode() + b"\n" for e in GOOD]


@pytest.mark.parametrize(
    "bad,problem",
    [
        (b"[1, 2, 3]\n", "a JSON list, not an object"),
        (b'"start"\n', "a JSON str, not an object"),
        (b'{"t": 0.2, "attempt": 0, "step": null}\n', "no 'kind' field"),
        (b'{"attempt": 0, "step": null, "kind": "spawn"}\n', "no 't' field"),
        (b'{"t": "soon", "attempt": 0, "step": null, "kind": "spawn"}\n', "'t' is 'soon', not a finite number"),
        (b'{"t": 0.2, "attempt": -1, "step": null, "kind": "spawn"}\n', "'attempt' is -1"),
        (b'{"t": 0.2, "attempt": 0, "step": "7", "kind": "spawn"}\n', "'step' is '7'"),
        (b'{"t": 0.2, "attempt": 0, "step": null, "kind": "compute"}\n', "'step' of a 'compute' event is None"),
        (b'{"t": 0.2, "attempt": 0, "step": 1, "kind": "step_end", "samples": "all"}\n', "'samples' of a 'step_end' event"),
        (b'{"t": 0.2, "attempt": 0, "step": null, "kind": "end", "completed": "yes"}\n', "'completed' of a 'end' event"),
        (b'{"t": 0.2, "attempt": 0, "step": null, "kind": "restored"}\n', "a 'restored' event without 'ckpt_step'"),
        (b"\0" * 4095 + b"\n", "NUL bytes"),
        (b'{"t": 0.2, "attempt": 0, "step": null, "kind": "sp\xffwn"}\n', "not valid UTF-8"),
        (b'{"t": 0.2, "attempt": 0,\n', "not JSON"),
        (b"\n", "an empty line"),
    ],
)
def test_a_line_that_is_not_an_event_is_rejected_naming_file_and_line(tmp_path, bad, problem):
    lines = good_lines()
    lines.insert(2, bad)  # line 3, in the middle of the log
    path = write_log(tmp_path / "events.jsonl", lines)
    with pytest.raises(EventLogError) as e:
        read_events(path)
    assert str(e.value).startswith(f"{path}, line 3: ") and problem in str(e.value)


def test_load_run_and_the_ledger_get_the_same_clear_error(tmp_path):
    lines = good_lines()
    lines.insert(1, b"[]\n")
    write_log(tmp_path / "events.jsonl", lines)
    (tmp_path / "summary.json").write_text(json.dumps(GOOD_SUMMARY))
    with pytest.raises(EventLogError, match=r"events.jsonl, line 2: a JSON list"):
        load_run(tmp_path)
    with pytest.raises(EventLogError, match="line 2"):
        build_ledger(read_events(tmp_path / "events.jsonl"))


def test_a_last_line_cut_short_is_skipped_with_a_warning(tmp_path):
    lines = good_lines()
    lines[-1] = lines[-1][:25]  # killed in the middle of writing the last line
    path = write_log(tmp_path / "events.jsonl", lines)
    with pytest.warns(EventLogWarning, match=r"line 5: cut short at the end"):
        events = read_events(path)
    assert [e["kind"] for e in events] == ["start", "spawn", "compute", "step_end"]
    assert build_ledger(events).wall_s == pytest.approx(0.6)


def test_a_well_formed_log_reads_without_warnings(tmp_path):
    path = write_log(tmp_path / "events.jsonl", good_lines())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_events(path) == sorted(GOOD, key=lambda e: e["t"])


def test_a_line_longer_than_any_event_is_rejected(tmp_path):
    path = write_log(tmp_path / "events.jsonl", [*good_lines(), b"x" * (2 << 20) + b"\n"])
    with pytest.raises(EventLogError, match="line 6: longer than"):
        read_events(path)


def test_a_log_that_is_a_link_is_refused(tmp_path):
    write_log(tmp_path / "real.jsonl", good_lines())
    (tmp_path / "events.jsonl").symlink_to(tmp_path / "real.jsonl")
    with pytest.raises(EventLogError, match="symbolic link"):
        read_events(tmp_path / "events.jsonl")


def test_live_progress_skips_what_is_not_an_event(tmp_path):
    path = write_log(tmp_path / "events.jsonl", [good_lines()[0], b"[]\n", b"\xff\n", good_lines()[2]])
    assert [e["kind"] for e in EventTail(path).poll()] == ["start", "compute"]


@pytest.mark.parametrize("bad", [b"[]", b"\x80\x04K\x01.", b'{"goodput": "high"}', b'{"goodput": 1, "wall_s": 1, "buckets": {}, "completed": true}'])
def test_a_summary_that_is_not_a_summary_is_rejected_by_name(tmp_path, bad):
    from goodputlab.errors import RunFileError

    write_log(tmp_path / "events.jsonl", good_lines())
    (tmp_path / "summary.json").write_bytes(bad)
    with pytest.raises(RunFileError, match=str(tmp_path / "summary.json")):
        load_run(tmp_path)
