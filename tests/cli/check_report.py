#!/usr/bin/env python3
"""check_report.py REPORT.json COUNT KIND [FIELD=VALUE | FIELD~TEXT]...

Checks vramguard's JSON reports (report_json=): exactly COUNT reports of kind KIND (other
kinds are ignored unless KIND is "all"), the first of which has every FIELD (a dotted
path: allocation.size, damage.first_offset, detail) equal to VALUE or containing TEXT.
Exit 0 if so, else 1 with the reason."""
import json, sys


def get(obj, path):
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def main():
    path, count, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    reports = json.load(open(path))
    picked = reports if kind == "all" else [r for r in reports if r.get("kind") == kind]
    if len(picked) != count:
        sys.exit("expected %d report(s) of kind %s, found %d: %s" %
                 (count, kind, len(picked), [r.get("kind") for r in reports]))
    for cond in sys.argv[4:]:
        if "~" in cond:
            field, text = cond.split("~", 1)
            value = json.dumps(get(picked[0], field)) if not isinstance(get(picked[0], field), str) else get(picked[0], field)
            if value is None or text not in value:
                sys.exit("%s: %r does not contain %r" % (field, value, text))
        else:
            field, want = cond.split("=", 1)
            got = get(picked[0], field)
            if str(got) != want:
                sys.exit("%s: expected %s, found %r" % (field, want, got))


main()
