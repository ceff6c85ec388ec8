"""summary.py - the summary of a benchmark run as data.

A Row is one figure: what it is, how it is measured, its peer, its target,
fencegate's value, the peer's value, their ratio and whether the target was
met. The table prints as Markdown, the columns "figure | fencegate | peer |
ratio | target | met/missed" (the peer column names the peer and shows its
value), and writes as JSON: {"title", "notes", "rows": [Row...]}, every
value a number or null (not measured), with its text as printed beside.
"""

import json
import operator

OPS = {">=": operator.ge, "<=": operator.le, "<": operator.lt,
       "==": operator.eq}


def fnum(v, fmt=None):
    """A figure as the table prints it: "-" when not measured."""
    if v is None or v == "":
        return "-"
    if fmt and not isinstance(v, str):
        return fmt % v
    return str(v)


def as_number(v):
    if v is None or v == "":
        return None
    if isinstance(v, (int, float)):
        return v
    try:
        f = float(str(v).split()[0])
    except (ValueError, IndexError):
        return None
    return None if f != f else f


def verdict(value, op, target):
    """met / missed / n/a of value OP target."""
    v = as_number(value)
    if v is None:
        return "n/a"
    return "met" if OPS[op](v, target) else "missed"


class Row:
    """fencegate, peer_value: numbers or strings as printed ("-" or None
    when not measured); ratio: a number; ratio_fmt: how it prints
    ("x" 1.23x, "%" 45 %, "2" 1.23, or text itself)."""

    def __init__(self, figure, how, fencegate=None, peer="", peer_value=None,
                 ratio=None, ratio_fmt="x", target="", result="",
                 peer_text=None, fencegate_text=None):
        self.figure = figure
        self.how = how
        self.fencegate = fencegate
        self.peer = peer
        self.peer_value = peer_value
        self.ratio = ratio
        self.ratio_fmt = ratio_fmt
        self.target = target
        self.result = result
        self.peer_text = peer_text
        self.fencegate_text = fencegate_text

    def cells(self):
        fg = self.fencegate_text if self.fencegate_text is not None \
            else ("" if self.fencegate == "" else fnum(self.fencegate))
        if self.peer_text is not None:
            peer = self.peer_text
        elif not self.peer and self.peer_value is None:
            peer = ""
        else:
            peer = ("%s %s" % (self.peer, fnum(self.peer_value))).strip()
        r = self.ratio
        if isinstance(r, str):
            ratio = r
        elif r is None:
            ratio = "-" if self.ratio_fmt in ("x", "%", "2") else ""
        elif self.ratio_fmt == "x":
            ratio = "%.2fx" % r
        elif self.ratio_fmt == "%":
            ratio = "%.0f %%" % (r * 100)
        else:
            ratio = "%.2f" % r
        return [self.figure, fg, peer, ratio, self.target, self.result]

    def as_dict(self):
        c = self.cells()
        return {"figure": self.figure, "how": self.how,
                "fencegate": as_number(self.fencegate), "fencegate_text": c[1],
                "peer": self.peer, "peer_value": as_number(self.peer_value),
                "peer_text": c[2], "ratio": self.ratio
                if not isinstance(self.ratio, str) else None,
                "ratio_text": c[3], "target": self.target,
                "result": self.result}


def ratio(a, b):
    a, b = as_number(a), as_number(b)
    if a is None or b is None or b <= 0:
        return None
    return a / b


ROW = "| %-48s | %12s | %-48s | %6s | %-10s | %-10s |"


def markdown(rows):
    out = [ROW % ("figure", "fencegate", "peer", "ratio", "target",
                  "met/missed"),
           ROW % ("-" * 48, "-" * 11 + ":", "-" * 48, "-" * 5 + ":",
                  "-" * 10, "-" * 10)]
    for r in rows:
        out.append(ROW % tuple(r.cells()))
    return "\n".join(out)


def write_json(path, title, notes, rows, extra=None):
    d = {"title": title, "notes": notes, "rows": [r.as_dict() for r in rows]}
    if extra:
        d.update(extra)
    with open(path, "w") as f:
        json.dump(d, f, indent=1)
        f.write("\n")
