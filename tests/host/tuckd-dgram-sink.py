#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Listen on an AF_UNIX datagram socket and append every datagram to a file,
# one record per datagram: sd_notify() messages (NOTIFY_SOCKET) and journal
# native-protocol entries (/run/systemd/journal/socket) for the tuckd tests.
# Journal entries with binary-encoded fields (a value containing a newline)
# are decoded to KEY=value lines too. Records are separated by a line "--".
#
# With --watchdog=USEC it also plays systemd's watchdog (WatchdogSec=) for
# the sender: once READY=1 has come, a gap of more than USEC without a
# WATCHDOG=1 adds the record "WATCHDOG=EXPIRED" (systemd would have killed
# it there), and the clock starts again.
import os
import socket
import struct
import sys
import time

args = sys.argv[1:]
watchdog = None
if args and args[0].startswith("--watchdog="):
    watchdog = int(args.pop(0).split("=", 1)[1]) / 1e6
path, out = args[0], args[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o666)
# Tell the starter we are listening.
print("listening", flush=True)


def decode(data):
    lines, i = [], 0
    while i < len(data):
        nl = data.find(b"\n", i)
        if nl < 0:
            nl = len(data)
        field = data[i:nl]
        if b"=" in field:
            lines.append(field.decode(errors="replace"))
            i = nl + 1
        else:
            (size,) = struct.unpack("<Q", data[nl + 1:nl + 9])
            value = data[nl + 9:nl + 9 + size]
            lines.append(field.decode() + "=" + value.decode(errors="replace").replace("\n", " "))
            i = nl + 9 + size + 1
    return lines


armed = None    # monotonic time of the last ping, once READY=1 came
with open(out, "a") as f:
    while True:
        if armed is not None:
            s.settimeout(max(armed + watchdog - time.monotonic(), 0.001))
        try:
            data, _ = s.recvfrom(1 << 20)
        except socket.timeout:
            f.write("WATCHDOG=EXPIRED\n--\n")
            f.flush()
            armed = time.monotonic()
            continue
        lines = decode(data)
        if watchdog is not None and ("READY=1" in lines or "WATCHDOG=1" in lines):
            armed = time.monotonic()
        f.write("\n".join(lines) + "\n--\n")
        f.flush()
