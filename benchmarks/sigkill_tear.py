"""Can a SIGKILL cut one ``write`` of a 40-byte step record short? Count it, and see where the cuts fall.

    python benchmarks/sigkill_tear.py [--kills 1500] [--dir /tmp] [--seed 3]

A child process appends the same 40-byte record to a file on an ``O_APPEND`` descriptor as fast as
it can, one ``os.write`` per record, as ``gl.Recorder`` writes its step records; it is killed with
SIGKILL after a random 1-20 ms. A file whose size is not a multiple of 40 holds a record cut short.

What it shows (Linux): a kill can cut the write in progress, and only where that write crosses a
page boundary. The kernel copies a buffered write one page at a time and checks for a fatal signal
before each page, so a write of 40 bytes that starts 16 bytes before a page's end can stop after
those 16. Every cut file's size is then a multiple of the page size (4096 bytes). The records
written before the kill are whole; the reader leaves the cut one out with a warning and the next
attempt truncates it (docs/RECORDER.md, "Durability"). Prints the kills, the files cut, and for
each cut its size modulo 4096 and the bytes of the record that were written.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

WRITER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
record = bytes(range(40))
os.write(1, b"w")
while True:
    os.write(fd, record)
"""
RECORD_BYTES = 40
PAGE = 4096


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kills", type=int, default=1500, help="writers to kill (default 1500, about 60 s)")
    p.add_argument("--dir", default=None, help="where the files go (default: a temporary folder)")
    p.add_argument("--seed", type=int, default=3)
    args = p.parse_args(argv)
    if args.kills < 1:
        p.error("--kills must be at least 1")
    rng = random.Random(args.seed)
    cuts: list[tuple[int, int, int]] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = os.path.join(tmp, "records.bin")
        for i in range(args.kills):
            if os.path.exists(path):
                os.unlink(path)
            w = subprocess.Popen([sys.executable, "-c", WRITER, path], stdout=subprocess.PIPE)
            w.stdout.read(1)  # it has opened the file and is writing
            time.sleep(rng.uniform(0.001, 0.02))
            w.kill()
            w.wait()
            w.stdout.close()
            size = os.path.getsize(path)
            if size % RECORD_BYTES:
                cuts.append((size, size % PAGE, size % RECORD_BYTES))
            if (i + 1) % 100 == 0 or i + 1 == args.kills:
                print(f"\r{i + 1}/{args.kills} kills, {len(cuts)} records cut short", end="", file=sys.stderr, flush=True)
        fs = subprocess.run(["stat", "-f", "-c", "%T", tmp], capture_output=True, text=True).stdout.strip()
    print(file=sys.stderr)
    print(f"{args.kills} kills of a writer of {RECORD_BYTES}-byte records ({fs or 'unknown'} file system, "
          f"{time.monotonic() - t0:.0f} s): {len(cuts)} files end with a record cut short")  # fmt: skip
    for size, mod_page, written in cuts:
        print(f"  size {size:>9,} bytes: size mod {PAGE} = {mod_page}, {written} of the record's {RECORD_BYTES} bytes written")
    if cuts:
        on_page = sum(1 for _, m, _ in cuts if m == 0)
        print(f"{on_page} of {len(cuts)} cuts end exactly at a page boundary")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
