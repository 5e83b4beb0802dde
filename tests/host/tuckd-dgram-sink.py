#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Listen on an AF_UNIX datagram socket and append every datagram to a file,
# one record per datagram: sd_notify() messages (NOTIFY_SOCKET) and journal
# native-protocol entries (/run/systemd/journal/socket) for the tuckd tests.
# Journal entries with binary-encoded fields (a value containing a newline)
# are decoded to KEY=value lines too. Records are separated by a line "--".
import os
import socket
import struct
import sys

path, out = sys.argv[1], sys.argv[2]
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


with open(out, "a") as f:
    while True:
        data, _ = s.recvfrom(1 << 20)
        f.write("\n".join(decode(data)) + "\n--\n")
        f.flush()
