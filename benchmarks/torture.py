"""Torture: kill the training worker at random moments, many of them inside checkpoint writes and
restores, damage checkpoint files between attempts, for every checkpoint strategy; then check that
nothing was lost.

    python benchmarks/torture.py [--kills 100] [--strategies sync,async,dcp,memory] [--json]

Each strategy gets one real run through the command line (``goodputlab run``, tiny preset, a
checkpoint every 2 steps, a hot spare so a restart is cheap, 0.3 s between a failure and the next
worker). This script is the failure: it follows the run's event log and SIGKILLs the live worker
(as the kernel's OOM killer would; the supervisor recovers from it like from its own kills), aiming
each kill at one of three moments:

* ``save``: a random instant (0-8 ms) after the worker starts a checkpoint save (for the background
  strategies the write then goes on in a thread, so the kill often lands inside it);
* ``restore``: a random instant (0-5 ms) after a restarted worker starts restoring;
* ``random``: a random instant 0.05-0.6 s into the worker's training.

While the supervisor waits between a failure and the next worker, it damages, with probability
one half (``--damage-prob``), one file of a random committed checkpoint (a flipped byte, a truncation, or a deletion),
or for ``--ckpt memory`` the RAM tier's current slot.

Checks, per run and in total (``--json`` prints them): ``kills`` (and ``kills_during_save``,
``kills_during_restore``: where the kill landed, read back from the event log: the killed worker's
last phase, or a background save in flight), ``damaged_files``, ``bit_exact`` (the final
``final_state_sha256`` equals a failure-free run's), ``bad_resumes`` (a restore from a checkpoint
damaged before the restore began and not written again since: must be 0; a damage the killer finished
only after the next worker had begun restoring, which a loaded machine makes happen, is counted as
``damaged_while_restoring`` instead: that restore may have read the file whole), ``leftover_tmp_files`` (temporaries
in the run folder, RAM tiers in ``/dev/shm``), ``orphan_processes`` (processes of the run alive
after the command returned).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from goodputlab.measure.events import EventTail, read_events  # noqa: E402

STRATEGIES = ("sync", "async", "dcp", "memory")
RESTART_DELAY_S = 0.3
BASE = ["--model", "tiny", "--threads", "1", "--ckpt-every", "2", "--keep", "2", "--seed", "11"]


def cli() -> list[str]:
    exe = Path(sys.executable).parent / "goodputlab"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "goodputlab.cli"]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def reference_sha(steps: int, work: Path) -> str:
    out = work / "reference"
    r = subprocess.run([*cli(), "run", *BASE, "--steps", str(steps), "--out", str(out), "--json", "--quiet"],
                       capture_output=True, text=True, env=env())
    if r.returncode != 0:
        raise SystemExit(f"the failure-free reference run failed:\n{r.stderr}")
    return json.loads(r.stdout)["final_state_sha256"]


class Killer(threading.Thread):
    """Follows a run's event log; kills its live worker ``kills`` times; damages checkpoints between attempts."""

    def __init__(self, out: Path, kills: int, rng: random.Random, memory: bool, damage_prob: float = 0.5):
        super().__init__(daemon=True)
        self.out, self.budget, self.rng, self.memory, self.damage_prob = out, kills, rng, memory, damage_prob
        self.killed = 0
        self.damage: list[dict] = []  # {"t", "step", "tier", "file", "how"}
        self.stop = threading.Event()
        self.pids: dict[int, int] = {}
        self.events: list[dict] = []
        self.cursor = 0  # events before it were seen by a wait
        self.t0: float | None = None  # the run's start on the monotonic clock (events' t counts from it)

    def _poll(self, tail: EventTail) -> list[dict]:
        new = tail.poll()
        for e in new:
            if e["kind"] == "worker_info":
                self.pids[e["attempt"]] = e["pid"]
        self.events.extend(new)
        return new

    def _wait_for(self, tail: EventTail, test, timeout: float) -> dict | None:
        """The next event (after the last one a wait returned) that passes ``test``, or None after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not self.stop.is_set():
            while self.cursor < len(self.events):
                e = self.events[self.cursor]
                self.cursor += 1
                if test(e):
                    return e
            if time.monotonic() >= deadline:
                return None
            if not self._poll(tail):
                time.sleep(0.002)
        return None

    def _kill(self, attempt: int) -> bool:
        pid = self.pids.get(attempt)
        if pid is None:
            return False
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        if b"goodputlab.engine.worker" not in cmdline or str(self.out).encode() not in cmdline:
            return False  # gone (and perhaps its pid reused)
        args = cmdline.split(b"\0")
        if self.t0 is None and b"--t0" in args:
            self.t0 = float(args[args.index(b"--t0") + 1])
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        return True

    def run(self) -> None:
        path = self.out / "events.jsonl"
        while not path.exists() and not self.stop.is_set():
            time.sleep(0.01)
        tail = EventTail(path)
        live = 0
        while self.killed < self.budget and not self.stop.is_set():
            target = self.rng.choice(("save", "save", "restore", "random"))
            if target == "restore" and self.killed > 0:
                e = self._wait_for(tail, lambda e: e["attempt"] == live and e["kind"] in ("restore", "compute"), 30)
                if e is None:
                    continue
                if e["kind"] == "restore":
                    time.sleep(self.rng.uniform(0, 0.005))
            elif target == "save":
                e = self._wait_for(tail, lambda e: e["attempt"] == live and e["kind"] == "ckpt_save", 30)
                if e is None:
                    continue
                time.sleep(self.rng.uniform(0, 0.008))
            else:
                e = self._wait_for(tail, lambda e: e["attempt"] == live and e["kind"] == "compute", 30)
                if e is None:
                    continue
                time.sleep(self.rng.uniform(0.05, 0.6))
            if live not in self.pids:
                self._poll(tail)
            if not self._kill(live):
                if any(e["kind"] == "end" for e in self.events):
                    return
                continue
            self.killed += 1
            if self._wait_for(tail, lambda e: e["kind"] == "failure" and e["attempt"] == live, 30) is None:
                return
            delay = self._wait_for(tail, lambda e: e["kind"] in ("restart_delay", "spawn", "handover", "end"), 10)
            if delay is not None and delay["kind"] == "restart_delay" and self.rng.random() < self.damage_prob:
                self._damage()
            live += 1

    def _done_at(self) -> float:
        """Now, on the event log's clock (a damage follows a kill, which read the worker's ``--t0``)."""
        return time.monotonic() - self.t0

    def _damage(self) -> None:
        """One file of a random committed checkpoint (or the RAM tier's current slot), damaged.

        The damage is booked when it is done, not when the supervisor began its wait: on a loaded
        machine that can be after the next worker has begun restoring."""
        how = self.rng.choice(("flip", "truncate", "delete"))
        if self.memory and self.rng.random() < 0.5:
            tiers = sorted(Path("/dev/shm").glob(f"goodputlab-mem-{self.supervisor_pid}-*"))
            if tiers:
                cur = tiers[0] / "current.json"
                try:
                    slot = json.loads(cur.read_text())["slot"]
                    step = json.loads(cur.read_text())["step"]
                except (OSError, ValueError, KeyError):
                    return
                f = tiers[0] / f"slot-{slot}.data"
                self._hurt(f, "flip")
                self.damage.append({"t": self._done_at(), "step": step, "tier": "memory", "file": f.name, "how": "flip"})
                return
        ckpts = sorted((self.out / "ckpt").glob("step-*"))
        if not ckpts:
            return
        c = self.rng.choice(ckpts)
        files = sorted(p for p in c.rglob("*") if p.is_file())
        if not files:
            return
        f = self.rng.choice(files)
        self._hurt(f, how)
        self.damage.append({"t": self._done_at(), "step": int(c.name.split("-")[1]), "tier": "disk", "file": f.name, "how": how})

    def _hurt(self, f: Path, how: str) -> None:
        try:
            if how == "delete":
                f.unlink()
            elif how == "truncate":
                with open(f, "r+b") as fh:
                    fh.truncate(max(0, f.stat().st_size // 2))
            else:
                with open(f, "r+b") as fh:
                    size = f.stat().st_size
                    if size == 0:
                        return
                    at = self.rng.randrange(size)
                    fh.seek(at)
                    b = fh.read(1)
                    fh.seek(at)
                    fh.write(bytes([b[0] ^ 0xFF]))
        except OSError:
            pass


def where_kills_landed(events: list[dict]) -> tuple[int, int]:
    """(kills during a checkpoint write, kills during a restore), from the event log."""
    phases = {"start", "spawn", "failure", "restart_delay", "end", "teardown", "init", "restore", "warmup",
              "data_wait", "compute", "step_end", "ckpt_save", "exit", "hang", "handover", "resume", "activate",
              "crash", "loader_rebuild", "straggle"}  # fmt: skip
    in_save = in_restore = 0
    for f in (e for e in events if e["kind"] == "failure" and e.get("cause") == "killed"):
        mine = [e for e in events if e["attempt"] == f["attempt"] and e["t"] <= f["t"] and e["kind"] != "failure"]
        last = next((e for e in reversed(mine) if e["kind"] in phases), None)
        saves = [e for e in mine if e["kind"] == "ckpt_save"]
        commits = {e.get("ckpt_step") for e in mine if e["kind"] == "ckpt_commit"}
        in_flight = bool(saves) and (saves[-1]["step"] + 1) not in commits
        if last is not None and last["kind"] == "restore":
            in_restore += 1
        elif (last is not None and last["kind"] == "ckpt_save") or in_flight:
            in_save += 1
    return in_save, in_restore


def _restore_began(events: list[dict], restored: dict) -> float:
    """When the restore that ended in the ``restored`` event began (its attempt's ``restore`` event)."""
    return max((e["t"] for e in events if e["kind"] == "restore" and e["attempt"] == restored["attempt"]
                and e["t"] <= restored["t"]), default=restored["t"])


def bad_resumes(events: list[dict], damage: list[dict]) -> int:
    """Restores that used a checkpoint damaged before they began and not written again since.

    A damage done while a restore was already reading is not counted: the restore may have read the
    file whole before it (its checks see what it read; ``bit_exact`` judges the result)."""
    return len(bad_resume_pairs(events, damage))


def bad_resume_pairs(events: list[dict], damage: list[dict]) -> list[dict]:
    """Each bad resume (:func:`bad_resumes`) as ``{"restore_began", "restored", "damage"}``, to say which."""
    bad = []
    for r in (e for e in events if e["kind"] == "restored"):
        began = _restore_began(events, r)
        for d in damage:
            if d["step"] != r["ckpt_step"] or d["t"] > began or d["tier"] != r.get("source"):
                continue
            rewritten = any(
                c["kind"] == "ckpt_commit" and c.get("ckpt_step") == d["step"] and d["t"] < c["t"] < r["t"]
                and (d["tier"] in (c.get("tier") or "disk"))
                for c in events
            )
            if not rewritten:
                bad.append({"restore_began": began, "restored": r, "damage": d})
    return bad


def damaged_while_restoring(events: list[dict], damage: list[dict]) -> int:
    """Damages done to a checkpoint while a restore that went on to use it was already reading (not a
    bad resume: counted to show how late a loaded machine lets the damage land)."""
    late = 0
    for r in (e for e in events if e["kind"] == "restored"):
        began = _restore_began(events, r)
        late += sum(1 for d in damage if d["step"] == r["ckpt_step"] and d["tier"] == r.get("source") and began < d["t"])
    return late


def leftovers(out: Path, supervisor_pid: int) -> list[str]:
    found = [str(p.relative_to(out)) for p in out.rglob("*") if p.name.startswith((".tmp-", ".trash-")) or p.name.endswith(".tmp")]
    found += [str(p) for p in Path("/dev/shm").glob(f"goodputlab-mem-{supervisor_pid}-*")]
    return found


def orphans(out: Path) -> list[int]:
    alive = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(out).encode() in cmd and state not in ("Z", "X"):
            alive.append(int(d.name))
    return alive


def torture(strategy: str, kills: int, steps: int, ref: str, work: Path, seed: int, damage_prob: float = 0.5) -> dict:
    out = work / strategy
    extra = ["--memory-disk-every", "3"] if strategy == "memory" else []
    cmd = [*cli(), "run", *BASE, "--steps", str(steps), "--ckpt", strategy, *extra, "--hot-spare",
           "--restart-delay", str(RESTART_DELAY_S), "--max-failures", "100000", "--out", str(out), "--json", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    killer = Killer(out, kills, random.Random(f"{seed}-{strategy}"), strategy == "memory", damage_prob)
    killer.supervisor_pid = proc.pid
    t = time.monotonic()
    killer.start()
    stdout, stderr = proc.communicate()
    killer.stop.set()
    killer.join()
    seconds = time.monotonic() - t
    time.sleep(0.5)  # let the kernel finish reaping anything that was killed with the run
    summary = json.loads(stdout) if proc.returncode == 0 and stdout.strip() else None
    events = read_events(out / "events.jsonl") if (out / "events.jsonl").exists() else []
    in_save, in_restore = where_kills_landed(events)
    return {
        "strategy": strategy,
        "returncode": proc.returncode,
        "stderr_tail": "\n".join(stderr.strip().splitlines()[-5:]),
        "kills": killer.killed,
        "failures_recovered": sum(1 for e in events if e["kind"] == "failure"),
        "kills_during_save": in_save,
        "kills_during_restore": in_restore,
        "damaged_files": len(killer.damage),
        "skipped_as_damaged": sum(1 for e in events if e["kind"] == "ckpt_invalid"),
        "bad_resumes": bad_resumes(events, killer.damage),
        "bad_resume_details": bad_resume_pairs(events, killer.damage),
        "damaged_while_restoring": damaged_while_restoring(events, killer.damage),
        "bit_exact": bool(summary) and summary["final_state_sha256"] == ref,
        "leftover_tmp_files": leftovers(out, proc.pid),
        "orphan_processes": orphans(out),
        "seconds": round(seconds, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=100, help="kills in all, shared by the strategies (default 100)")
    p.add_argument("--strategies", default=",".join(STRATEGIES), help="comma-separated (default: all four)")
    p.add_argument("--seed", type=int, default=0, help="seeds where the kills land and what is damaged")
    p.add_argument("--damage-prob", type=float, default=0.5, help="chance of damaging a file after each kill (default 0.5)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--keep", action="store_true", help="keep the run folders (printed at the end)")
    args = p.parse_args(argv)
    strategies = [s for s in args.strategies.split(",") if s]
    per = -(-args.kills // len(strategies))
    steps = 120 + 12 * per
    work = Path(tempfile.mkdtemp(prefix="goodputlab-torture-"))
    t0 = time.monotonic()
    try:
        ref = reference_sha(steps, work)
        runs = []
        for s in strategies:
            r = torture(s, per, steps, ref, work, args.seed, args.damage_prob)
            runs.append(r)
            if not args.json:
                print(f"{s:<7} kills {r['kills']:>3} (in a save {r['kills_during_save']:>3}, in a restore "
                      f"{r['kills_during_restore']:>2})  damaged {r['damaged_files']:>2} (skipped {r['skipped_as_damaged']:>2})"
                      f"  bad resumes {r['bad_resumes']} (late damage {r['damaged_while_restoring']})  bit-exact {r['bit_exact']}  leftovers {len(r['leftover_tmp_files'])}"
                      f"  orphans {len(r['orphan_processes'])}  {r['seconds']:.0f} s", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    total = {
        "kills": sum(r["kills"] for r in runs),
        "kills_during_save": sum(r["kills_during_save"] for r in runs),
        "kills_during_restore": sum(r["kills_during_restore"] for r in runs),
        "damaged_files": sum(r["damaged_files"] for r in runs),
        "bit_exact": all(r["bit_exact"] for r in runs),
        "bad_resumes": sum(r["bad_resumes"] for r in runs),
        "damaged_while_restoring": sum(r["damaged_while_restoring"] for r in runs),
        "leftover_tmp_files": sum(len(r["leftover_tmp_files"]) for r in runs),
        "orphan_processes": sum(len(r["orphan_processes"]) for r in runs),
        "runs": runs,
        "seconds": round(time.monotonic() - t0, 1),
    }
    ok = total["bit_exact"] and not total["bad_resumes"] and not total["leftover_tmp_files"] and not total["orphan_processes"]
    if args.json:
        print(json.dumps(total, indent=1))
    else:
        print(f"\ntotal: {total['kills']} kills ({total['kills_during_save']} in a checkpoint write, "
              f"{total['kills_during_restore']} in a restore), {total['damaged_files']} files damaged; "
              f"bit-exact {total['bit_exact']}, bad resumes {total['bad_resumes']}, leftover temporaries "
              f"{total['leftover_tmp_files']}, orphan processes {total['orphan_processes']}; {total['seconds']:.0f} s")
        if args.keep:
            print(f"run folders in {work}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
