#!/usr/bin/env bash
# The live view against hostile clients (issue 30, item 5): kinreg's RSS and
# a real viewer's service, with and without them.
#
#   bench/view_hostile.sh [SECONDS] [EVENT_CLIENTS] [IDLE_CLIENTS]
#                         (default 60 s, 150 event clients, 1000 idle connections)
#
# Each of two runs is `kinreg run synthetic --rate 1 --view 127.0.0.1:0` (a
# replay at the recorded 30 frames/s, model snapshots of 100 000 points once
# a second) with one real viewer attached from the start: a client that
# reads /events all along (reconnecting when the stream ends or is refused)
# and loads / every 2 s. After a 10 s warm-up, the second run adds for
# SECONDS:
#   - EVENT_CLIENTS clients that send `GET /events` and never read (receive
#     buffer 4 KiB), held open;
#   - IDLE_CLIENTS connections that send nothing, reopened when the server
#     closes them (so the pressure lasts);
# while the first run has only the viewer. RSS of the kinreg process is
# sampled every 0.5 s; printed: its median and maximum over the hostile
# window (the same window in the first run), the difference, the viewer's
# events, page loads and failures in that window, and kinreg's own closing
# line (pages refused, ended for not reading, foreign Host).
#
# Needs python3 (standard library only). The process needs about
# IDLE_CLIENTS + EVENT_CLIENTS + 100 open files: `ulimit -n` is raised here.
# Environment: KINREG (default build/kinreg), OUT (default build/view_hostile).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
events=${2:-150}
idle=${3:-1000}
kinreg=${KINREG:-$here/build/kinreg}
out=${OUT:-$here/build/view_hostile}
[ -x "$kinreg" ] || { echo "view_hostile: $kinreg not found: build first" >&2; exit 1; }
"$kinreg" view --help >/dev/null 2>&1 || { echo "view_hostile: $kinreg has no live view (libmicrohttpd-dev)" >&2; exit 1; }
mkdir -p "$out"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

echo "# $(date -u +%Y-%m-%d) on $(uname -n): $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); hostile window ${seconds} s: $events event clients, $idle idle connections"

one_run() { # NAME HOSTILE(0|1)
    local name=$1 hostile=$2 log="$out/$1.log" url=""
    local duration=$((seconds + 25))
    "$kinreg" run synthetic --duration "$duration" --rate 1 -q --progress 0 -b cpu \
        --view 127.0.0.1:0 2>"$log" &
    local pid=$!
    for _ in $(seq 200); do
        url=$(grep -o 'http://127.0.0.1:[0-9]*/' "$log" 2>/dev/null || true)
        [ -n "$url" ] && break
        sleep 0.05
    done
    [ -n "$url" ] || { echo "view_hostile: the view did not start:" >&2; cat "$log" >&2; kill "$pid"; exit 1; }
    python3 - "$pid" "${url#http://127.0.0.1:}" "$seconds" "$hostile" "$events" "$idle" "$name" <<'PY'
import os, select, socket, statistics, sys, threading, time

pid, port, seconds, hostile, n_events, n_idle, name = sys.argv[1:8]
port = int(port.rstrip("/")); seconds = float(seconds); hostile = hostile == "1"
n_events = int(n_events); n_idle = int(n_idle)
HOST = b"127.0.0.1:%d" % port
stop = threading.Event()
window = [None, None]          # hostile window [start, end] (monotonic)
viewer = {"events": [], "loads_ok": [], "loads_failed": [], "streams_failed": []}

def rss_mib():
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")

def in_window(t):
    return window[0] is not None and window[0] <= t and (window[1] is None or t <= window[1])

def viewer_stream():
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /events HTTP/1.1\r\nHost: " + HOST + b"\r\n\r\n")
            s.settimeout(5)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(4096)
                if not chunk: raise OSError("closed before the headers")
                head += chunk
            if not head.startswith(b"HTTP/1.1 200"):
                raise OSError(head.split(b"\r\n")[0].decode())
            buf = b"\n" + head.split(b"\r\n\r\n", 1)[1]
            while not stop.is_set():
                chunk = s.recv(65536)
                if not chunk: raise OSError("the stream ended")
                buf += chunk
                n = buf.count(b"\nevent: ")
                if n: viewer["events"].extend([time.monotonic()] * n)
                buf = buf[-8:] if not buf.endswith(b"\nevent: ") else b""
            s.close()
        except OSError as e:
            viewer["streams_failed"].append((time.monotonic(), str(e)))
            time.sleep(0.5)

def viewer_loads():
    while not stop.is_set():
        t = time.monotonic()
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.settimeout(5)
            s.sendall(b"GET / HTTP/1.1\r\nHost: " + HOST + b"\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk: break
                data += chunk
            s.close()
            ok = data.startswith(b"HTTP/1.1 200") and b"</html>" in data
            (viewer["loads_ok"] if ok else viewer["loads_failed"]).append(t)
        except OSError as e:
            viewer["loads_failed"].append(t)
        time.sleep(2)

def hostile_clients():
    held = []
    for _ in range(n_events):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /events HTTP/1.1\r\nHost: " + HOST + b"\r\n\r\n")
        held.append(s)
    idle = {}
    def open_idle():
        s = socket.socket()
        s.setblocking(False)
        try: s.connect(("127.0.0.1", port))
        except BlockingIOError: pass
        idle[s.fileno()] = s
    for _ in range(n_idle): open_idle()
    reopened = 0
    while not stop.is_set() and time.monotonic() < window[0] + seconds:
        # An idle connection becomes readable only when the server closes it.
        p = select.poll()
        for fd in idle: p.register(fd, select.POLLIN)
        for fd, _ in p.poll(500):
            s = idle.pop(fd, None)
            if s is None: continue
            s.close(); open_idle(); reopened += 1
    for s in held + list(idle.values()): s.close()
    print("  idle connections reopened after the server closed them: %d" % reopened)

threading.Thread(target=viewer_stream, daemon=True).start()
threading.Thread(target=viewer_loads, daemon=True).start()
samples = []
t0 = time.monotonic()
while time.monotonic() - t0 < 10:
    samples.append((time.monotonic(), rss_mib())); time.sleep(0.5)
window[0] = time.monotonic()
if hostile:
    h = threading.Thread(target=hostile_clients, daemon=True); h.start()
while time.monotonic() < window[0] + seconds:
    samples.append((time.monotonic(), rss_mib())); time.sleep(0.5)
window[1] = time.monotonic()
stop.set()
if hostile: h.join(10)
w = [r for t, r in samples if in_window(t)]
ev = [t for t in viewer["events"] if in_window(t)]
gaps = [b - a for a, b in zip(ev, ev[1:])]
print("%s: RSS median %.1f MiB, max %.1f MiB over the %g s window (warm-up end %.1f MiB)"
      % (name, statistics.median(w), max(w), seconds, samples[19][1] if len(samples) > 19 else w[0]))
print("  viewer: %d events in the window, longest gap %.2f s; page loads %d ok, %d failed; "
      "streams refused or ended %d"
      % (len(ev), max(gaps) if gaps else float("nan"),
         len([t for t in viewer["loads_ok"] if in_window(t)]),
         len([t for t in viewer["loads_failed"] if in_window(t)]),
         len([f for f in viewer["streams_failed"] if in_window(f[0])])))
with open(os.environ.get("RESULT", "/dev/null"), "a") as f:
    f.write("%s %.1f %.1f\n" % (name, statistics.median(w), max(w)))
PY
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" || true
    grep -h 'the view refused' "$log" | sed 's/^/  /' || true
}

export RESULT="$out/result.txt"
: > "$RESULT"
one_run quiet 0
one_run hostile 1
awk 'NR==1{qm=$2; qx=$3} NR==2{printf "difference: median %+.1f MiB, max %+.1f MiB (hostile - quiet)\n", $2-qm, $3-qx}' "$RESULT"
