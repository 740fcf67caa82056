#!/usr/bin/env bash
# Record a training loop, SIGKILL it mid-run, restart it, and report where the time went.
#
#   examples/kill_and_restart.sh [plain|dcp] [RUN_DIR] [loop options, e.g. --steps 300]
#
# RUN_DIR (default runs/example-plain or runs/example-dcp) is emptied first. The loop is
# killed with SIGKILL once KILL_AFTER steps (default 40) have completed, as a failing node
# would kill it, so it dies while training between two checkpoints; after RESTART_DELAY
# seconds (default 0.5) it runs again, resumes from its newest checkpoint and finishes.
# PYTHON and GOODPUTLAB name the interpreter and the CLI (default: the repository's .venv).
set -euo pipefail

which=${1:-plain}
run_dir=${2:-runs/example-$which}
shift $(( $# < 2 ? $# : 2 ))
here=$(cd "$(dirname "$0")" && pwd)
venv="$here/../.venv/bin"
PYTHON=${PYTHON:-$( [ -x "$venv/python" ] && echo "$venv/python" || echo python3 )}
GOODPUTLAB=${GOODPUTLAB:-$( [ -x "$venv/goodputlab" ] && echo "$venv/goodputlab" || echo goodputlab )}
KILL_AFTER=${KILL_AFTER:-40}
RESTART_DELAY=${RESTART_DELAY:-0.5}
loop="$here/${which}_loop.py"
[ -f "$loop" ] || { echo "kill_and_restart.sh: no loop '$which' (plain or dcp)" >&2; exit 2; }

rm -rf "$run_dir"
steps_done() {  # the loop's completed steps: its step_end events (kind 3 at byte 36 of each 40-byte record)
  if [ -f "$run_dir/events.steps.bin" ]; then
    od -An -v -t u2 -j40 "$run_dir/events.steps.bin" | awk '{ for (i = 1; i <= NF; i++) v[n++] = $i }
      END { for (r = 0; (r + 1) * 20 <= n; r++) if (v[r * 20 + 18] == 3) c++; print c + 0 }'
  else
    grep -c '"kind":"step_end"' "$run_dir/events.jsonl" 2>/dev/null || true
  fi
}
"$PYTHON" "$loop" --run-dir "$run_dir" "$@" &
pid=$!
while :; do
  done_steps=$(steps_done)
  [ "${done_steps:-0}" -ge "$KILL_AFTER" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "kill_and_restart.sh: the loop ended before $KILL_AFTER steps" >&2
    exit 1
  fi
  sleep 0.01
done
# stopped first, so the count printed is the steps it had completed when it died
kill -STOP "$pid" 2>/dev/null || { echo "kill_and_restart.sh: the loop ended before the kill; give it more --steps" >&2; exit 1; }
done_steps=$(steps_done)
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
echo "SIGKILL after $done_steps steps; restarting in $RESTART_DELAY s"
sleep "$RESTART_DELAY"
"$PYTHON" "$loop" --run-dir "$run_dir" "$@"
"$GOODPUTLAB" report "$run_dir"
