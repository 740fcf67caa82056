"""docs/BAD_INPUT.md is the contract for bad input: every row of its tables is run here and its
stderr compared character for character; every flag of every command must appear in it."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from goodputlab.cli import build_parser, main
from goodputlab.engine.config import RunConfig
from goodputlab.engine.run_dir import MARKER

DOC = Path(__file__).resolve().parent.parent / "docs" / "BAD_INPUT.md"
ROW = re.compile(r"^\| `(?P<flag>--[a-z0-9-]+)` \| `(?P<command>[^`]+)`(?P<note>[^|]*)\| `(?P<message>.+)` \|$")
SIM_REQUIRED = {
    "--devices": "1024", "--device-mtbf-h": "50000", "--days": "2",
    "--interval-min": "30", "--save-s": "20", "--restart-s": "300",
}  # fmt: skip
SERVE_REQUIRED = {"--rate": "5", "--ttft-ms": "400", "--tpot-ms": "12"}


def rows():
    found = []
    for line in DOC.read_text().splitlines():
        m = ROW.match(line)
        if m:
            found.append(pytest.param(m["flag"], m["command"], m["note"].strip(), m["message"], id=m["command"]))
    return found


def test_the_document_has_a_row_for_every_flag_that_takes_a_value():
    text = DOC.read_text()
    documented = {(p.values[1].split()[0], p.values[0]) for p in rows()}  # (command, flag): each command its own rows
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        for action in parser._actions:
            for flag in action.option_strings:
                if flag in ("-h", "--help"):
                    continue
                assert f"`{flag}`" in text, f"{name} {flag} is not in docs/BAD_INPUT.md"
                if action.nargs != 0:
                    assert (name, flag) in documented, f"{name} {flag} takes a value but has no row"
    assert len(rows()) >= 60


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-input")
    other = root / "other"
    other.mkdir()
    (other / "notes.txt").write_text("the user's")
    afile = root / "afile"
    afile.write_text("a file")
    marker_link = root / "marker-link"
    marker_link.mkdir()
    (marker_link / MARKER).symlink_to(afile)
    ckpt_link = root / "ckpt-link"
    ckpt_link.mkdir()
    (ckpt_link / MARKER).write_text(json.dumps({"run_id": "0123456789abcdef0123456789abcdef"}))
    (root / "elsewhere").mkdir()
    (ckpt_link / "ckpt").symlink_to(root / "elsewhere")
    stopped = root / "stopped"  # the folder of a run that stopped: what --resume continues
    stopped.mkdir()
    (stopped / MARKER).write_text("{}")
    (stopped / "config.json").write_text(json.dumps(RunConfig(steps=400).to_dict()))
    (stopped / "events.jsonl").write_text('{"t":0.0,"attempt":0,"step":null,"kind":"start"}\n')
    running = root / "running"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from goodputlab.engine.run_dir import claim_run_dir; "
         "c = claim_run_dir(sys.argv[1]); print('held', flush=True); time.sleep(120)", str(running)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    yield {
        "<folder with other files>": str(other),
        "<folder of a running run>": str(running),
        "<a file>": str(afile),
        "<run folder whose marker is a link>": str(marker_link),
        "<run folder whose ckpt is a link>": str(ckpt_link),
        "<stopped run folder>": str(stopped),
        "<pid>": str(holder.pid),
        "<repository>": str(DOC.parent.parent),
        "root": root,
    }
    holder.kill()
    holder.wait()


@pytest.mark.parametrize("flag,command,note,message", rows())
def test_every_documented_bad_input_gives_the_documented_line(flag, command, note, message, places, capsys, tmp_path):
    if "without CUDA" in note:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    if "larger than 4 GiB" in note:
        from goodputlab.recovery.disk_full import MAX_FILL_BYTES, size_bytes

        if size_bytes(tmp_path) <= MAX_FILL_BYTES:
            pytest.skip("this machine's temporary folder is on a small file system")
    for placeholder, value in places.items():
        if placeholder.startswith("<"):
            command = command.replace(placeholder, value)
            message = message.replace(placeholder, value)
    argv = shlex.split(command)
    if argv[0] == "run" and not any(a.split("=")[0] in ("--out", "--resume") for a in argv):
        argv += ["--out", str(tmp_path / "new")]
    if argv[0] == "simulate":
        given = set(argv) | ({"--device-mtbf-h"} if "--node-failures-per-1000-days" in argv else set())  # its alternative
        argv += [x for flag_, value in SIM_REQUIRED.items() if flag_ not in given for x in (flag_, value)]
    if argv[0] == "serve-bench":
        argv += [x for flag_, value in SERVE_REQUIRED.items() if flag_ not in argv for x in (flag_, value)]
    before = sorted(p.name for p in places["root"].rglob("*"))
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    out, err = capsys.readouterr()
    assert code == 2
    assert err == message + "\n" and out == ""
    assert not (tmp_path / "new").exists() or not any((tmp_path / "new").iterdir())  # nothing started
    assert sorted(p.name for p in places["root"].rglob("*")) == before  # nothing touched


def value_flags():
    """Every flag that takes a value, of every command, from the parsers themselves."""
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return [pytest.param(name, action.option_strings[-1], id=f"{name} {action.option_strings[-1]}")
            for name, parser in sub.choices.items() for action in parser._actions
            if action.option_strings and action.nargs != 0 and "--help" not in action.option_strings]


@pytest.mark.parametrize("command,flag", value_flags())
def test_a_flag_given_the_end_of_options_as_its_value_gets_one_line(command, flag, capsys, tmp_path, monkeypatch):
    """``--flag=--``: argparse hands the flag an empty list; every command must still answer in one line, exit 2."""
    monkeypatch.chdir(tmp_path)  # a folder named "--" would be made here, were it accepted
    argv = [command, f"{flag}=--"]
    if command == "simulate":
        argv += [x for f, v in SIM_REQUIRED.items() if f != flag for x in (f, v)]
    if command == "serve-bench":
        argv += [x for f, v in SERVE_REQUIRED.items() if f != flag for x in (f, v)]
    if command == "report":
        argv += [str(tmp_path)]
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"goodputlab {command}: error: "), err
    assert list(tmp_path.iterdir()) == []


def every_flag():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return [pytest.param(name, flag, id=f"{name} {flag}") for name, parser in sub.choices.items()
            for action in parser._actions for flag in action.option_strings if flag.startswith("--") and flag != "--help"]


def _required(command: str, tmp_path) -> list[str]:
    extra = {"simulate": SIM_REQUIRED, "serve-bench": SERVE_REQUIRED,
             "optimal": {"--save-s": "60", "--mtbf-s": "3600"}}.get(command, {})
    return [x for f, v in extra.items() for x in (f, v)] + ([str(tmp_path)] if command == "report" else [])


@pytest.mark.parametrize("command,flag", every_flag())
def test_a_misspelt_flag_gets_one_line_that_suggests_the_flag(command, flag, capsys, tmp_path):
    middle = len(flag) // 2 + 1
    misspelt = flag[:middle] + flag[middle + 1 :]  # one letter dropped inside the name
    try:
        code = main([command, misspelt, *_required(command, tmp_path)])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert err.startswith(f"goodputlab {command}: error: ") and flag in err, err
    if not flag.startswith(misspelt):  # not an abbreviation argparse takes (or finds ambiguous)
        assert f"unrecognized arguments: {misspelt} (did you mean " in err, err


def test_a_misspelt_command_gets_a_suggestion(capsys):
    with pytest.raises(SystemExit) as e:
        main(["rnu", "--steps", "3"])
    assert e.value.code == 2
    assert capsys.readouterr().err == ("goodputlab: error: COMMAND 'rnu' is invalid; allowed: one of run, optimal, "
                                       "simulate, batch-sweep, serve-bench, report, claim (did you mean run?)\n")
# --- a run folder or recording someone sent you: each attack built for real --------------------
ATTACK = re.compile(r"^\| `(?P<attack>[a-z0-9-]+)`: (?P<what>[^|]*)\| `(?P<message>.+)` \|$")
GOOD_LOG = (
    b'{"t":0.0,"attempt":0,"step":null,"kind":"init","total_steps":1}\n'
    b'{"t":0.1,"attempt":0,"step":0,"kind":"compute"}\n'
    b'{"t":0.2,"attempt":0,"step":0,"kind":"step_end","loss":1.0}\n'
    b'{"t":0.3,"attempt":0,"step":null,"kind":"end","completed":true,"clean":true,"reason":"completed"}\n'
)
GOOD_SUMMARY = {
    "goodput": 0.5, "wall_s": 0.3, "buckets": {"productive": 0.15}, "completed": True, "config": {"steps": 1},
    "failures": 0, "checkpoints": 0, "steps_completed": 1, "steps_executed": 1,
}  # fmt: skip


def attacks(prefix: str):
    found = []
    for line in DOC.read_text().splitlines():
        m = ATTACK.match(line)
        if m and m["attack"].startswith("recorder-") == (prefix == "recorder-"):
            found.append(pytest.param(m["attack"], m["message"], id=m["attack"]))
    return found


def _recording(folder: Path, second_line: bytes | None = None) -> None:
    """A good one-step recording; ``second_line`` replaces its second line."""
    folder.mkdir()
    (folder / "recorder.json").write_text('{"format": 1, "t0_unix": 1.0}\n')
    lines = GOOD_LOG.splitlines(keepends=True)
    if second_line is not None:
        lines[1] = second_line + b"\n"
    (folder / "events.jsonl").write_bytes(b"".join(lines))


def _lab_folder(folder: Path, **summary) -> None:
    """A lab run's folder whose summary.json has ``summary``'s changes (None: the field left out)."""
    folder.mkdir()
    (folder / "events.jsonl").write_bytes(GOOD_LOG)
    fields = {k: v for k, v in {**GOOD_SUMMARY, **summary}.items() if v is not None}
    text = json.dumps(fields)  # NaN and Infinity as Python's json writes them
    (folder / "summary.json").write_text(text)


DEEP = b"[" * 100_000 + b"]" * 100_000
REPORT_ATTACKS = {
    "link-to-dev-zero": lambda d: (d.mkdir(), (d / "recorder.json").write_text("{}"), (d / "events-rank0.jsonl").symlink_to("/dev/zero")),
    "fifo-log": lambda d: (d.mkdir(), os.mkfifo(d / "events-rank0.jsonl")),
    "fifo-lock": lambda d: (_recording(d), os.mkfifo(d / ".events.jsonl.lock")),
    "summary-missing-field": lambda d: _lab_folder(d, failures=None),
    "line-over-1mb": lambda d: _recording(d, b'{"t":0.1,"pad":"' + b"x" * (2 << 20) + b'"}'),
    "t-is-text": lambda d: _recording(d, b'{"t":"x","attempt":0,"step":0,"kind":"compute"}'),
    "t-is-nan": lambda d: _recording(d, b'{"t":NaN,"attempt":0,"step":0,"kind":"compute"}'),
    "t-huge": lambda d: _recording(d, b'{"t":1e308,"attempt":0,"step":0,"kind":"compute"}'),
    "attempts-past-limit": lambda d: _recording(d, b"".join(b'{"t":0.1,"attempt":%d,"step":0,"kind":"compute"}\n' % a
                                                            for a in range(10_001))[:-1]),
    "deep-nesting": lambda d: _recording(d, b'{"t":0.1,"deep":' + DEEP + b"}"),
    "huge-integer": lambda d: _recording(d, b'{"t":0.1,"attempt":' + b"9" * 5000 + b',"step":0,"kind":"compute"}'),
    "huge-integer-summary": lambda d: (_lab_folder(d), (d / "summary.json").write_text('{"failures": ' + "9" * 5000 + "}")),
    "deep-summary": lambda d: (_lab_folder(d), (d / "summary.json").write_bytes(DEEP)),
    "nan-goodput": lambda d: _lab_folder(d, goodput=float("nan")),
    "negative-wall": lambda d: _lab_folder(d, wall_s=-5),
    "infinite-bucket": lambda d: _lab_folder(d, buckets={"productive": float("inf")}),
    "records-link": lambda d: (_recording(d), (d / "events.steps.bin").symlink_to("/dev/zero")),
    "records-version": lambda d: (_recording(d), (d / "events.steps.bin").write_bytes(b"GLSTEPS\0\2\0\0\0\x28" + bytes(31))),
}


@pytest.mark.timeout(60)  # a FIFO or /dev/zero that is opened would hang or fill memory
@pytest.mark.parametrize("attack,message", attacks("report"))
def test_report_refuses_each_attack_with_one_line(attack, message, tmp_path, capsys):
    folder = tmp_path / "sent"
    REPORT_ATTACKS[attack](folder)
    before = {p.name: (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.iterdir()}
    code = main(["report", str(folder)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == message.replace("<folder>", str(folder)) + "\n"
    assert {p.name: (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.iterdir()} == before


def test_every_report_attack_is_documented():
    assert {p.values[0] for p in attacks("report")} == set(REPORT_ATTACKS)
    assert {p.values[0] for p in attacks("recorder-")} == set(RECORDER_ATTACKS)


RECORDER_ATTACKS = {
    "recorder-log-link": lambda d, victim: (d.mkdir(), (d / "events.jsonl").symlink_to(victim)),
    "recorder-log-fifo": lambda d, victim: (d.mkdir(), os.mkfifo(d / "events.jsonl")),
    "recorder-lock-link": lambda d, victim: (d.mkdir(), (d / ".events.jsonl.lock").symlink_to(victim)),
    "recorder-lock-fifo": lambda d, victim: (d.mkdir(), os.mkfifo(d / ".events.jsonl.lock")),
    "recorder-meta-link": lambda d, victim: (d.mkdir(), (d / "recorder.json").symlink_to(victim)),
    "recorder-records-link": lambda d, victim: (d.mkdir(), (d / "events.steps.bin").symlink_to(victim)),
    "recorder-foreign-log": lambda d, victim: (d.mkdir(), (d / "events.jsonl").write_bytes(b'{"ts": 1, "event": "batch"}\n' * 1000)),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("attack,message", attacks("recorder-"))
def test_the_recorder_refuses_a_planted_link_or_fifo_and_never_touches_its_target(attack, message, tmp_path):
    import goodputlab as gl
    from goodputlab.measure.recorder import RecorderError

    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"the user's data\n" * 1000)  # a log's tail repair would have truncated it
    folder = tmp_path / "prepared"
    RECORDER_ATTACKS[attack](folder, victim)
    with pytest.raises(RecorderError) as e:
        gl.Recorder(folder)
    assert f"RecorderError: {e.value}" == message.replace("<folder>", str(folder))
    assert "\n" not in str(e.value)
    assert victim.read_bytes() == b"the user's data\n" * 1000
