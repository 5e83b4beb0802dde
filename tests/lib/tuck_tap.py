# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parse TAP as the kselftest harness writes it, possibly several documents in
one stream (a guest's serial line carries one per test binary).

A stream may frame each document with the markers the kernel suite's init
writes:

    # tuck: run NAME
    TAP version 13
    ...
    # tuck: exit NAME STATUS

Without markers, each "TAP version" line starts a new document.
Test binaries print "# outcome FIXTURE.TEST: RESULT" lines (see
kernel/selftests/); they are collected per test name.
"""

import dataclasses
import re

RUN = re.compile(r"^# tuck: run (\S+)\s*$")
EXIT = re.compile(r"^# tuck: exit (\S+) (-?\d+)\s*$")
VERSION = re.compile(r"^TAP version \d+")
PLAN = re.compile(r"^1\.\.(\d+)")
POINT = re.compile(r"^(not ok|ok)\b\s*(\d+)?\s*(?:- )?([^#]*?)\s*(?:#\s*(SKIP|TODO|XFAIL)\b\s*(.*))?$", re.IGNORECASE)
BAIL = re.compile(r"^Bail out!")
OUTCOME = re.compile(r"^# outcome (\S+): (\S+)")


@dataclasses.dataclass
class Point:
    ok: bool
    number: int
    name: str
    directive: str  # "", "SKIP", "TODO", "XFAIL"
    reason: str


@dataclasses.dataclass
class Document:
    name: str
    plan: int | None = None
    points: list[Point] = dataclasses.field(default_factory=list)
    outcomes: dict[str, str] = dataclasses.field(default_factory=dict)
    comments: list[str] = dataclasses.field(default_factory=list)
    exit_status: int | None = None
    bailed_out: str | None = None

    def problems(self, allow_skip: bool) -> list[str]:
        """Everything that makes this document a failure, in words."""
        out = []
        if self.bailed_out is not None:
            out.append(f"bailed out: {self.bailed_out}")
        if self.plan is None:
            out.append("no plan (1..N): the program did not run to the end")
        elif self.plan != len(self.points):
            out.append(f"plan says {self.plan} tests, {len(self.points)} reported: the run was cut short")
        for p in self.points:
            if not p.ok and p.directive.upper() != "TODO":
                out.append(f"not ok {p.number} {p.name}")
            elif p.directive.upper() == "SKIP" and not allow_skip:
                out.append(f"skipped {p.number} {p.name}: {p.reason or 'no reason given'}")
        if self.exit_status not in (None, 0):
            out.append(f"exit status {self.exit_status}")
        return out


def parse(text: str, default_name: str = "tap") -> list[Document]:
    docs: list[Document] = []
    cur: Document | None = None
    framed = False

    def new(name: str) -> Document:
        d = Document(name=name)
        docs.append(d)
        return d

    for raw in text.splitlines():
        line = raw.rstrip("\r")
        m = RUN.match(line)
        if m:
            cur = new(m.group(1))
            framed = True
            continue
        m = EXIT.match(line)
        if m:
            if cur is None or cur.name != m.group(1):
                cur = new(m.group(1))
            cur.exit_status = int(m.group(2))
            cur = None
            continue
        if VERSION.match(line):
            if cur is None or (not framed and (cur.plan is not None or cur.points)):
                cur = new(default_name if not docs else f"{default_name}#{len(docs) + 1}")
            continue
        if cur is None:
            continue
        m = PLAN.match(line)
        if m:
            cur.plan = int(m.group(1))
            continue
        m = POINT.match(line)
        if m:
            number = int(m.group(2)) if m.group(2) else len(cur.points) + 1
            cur.points.append(Point(ok=m.group(1).lower() == "ok", number=number,
                                    name=m.group(3).strip(), directive=(m.group(4) or "").upper(),
                                    reason=(m.group(5) or "").strip()))
            continue
        if BAIL.match(line):
            cur.bailed_out = line
            continue
        m = OUTCOME.match(line)
        if m:
            cur.outcomes[m.group(1)] = m.group(2)
        if line.startswith("#"):
            cur.comments.append(line)
    return docs
