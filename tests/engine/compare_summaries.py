"""Compares two summary.json files number by number (relative tolerance 1e-9; differences below 1e-15 in absolute
terms pass, as values that should be zero, e.g. a stage's interference time, carry the round-off of subtracting
~1e-2 s times, ~1e-17 s): exit 1 and the first differences when they disagree. Used by maxmin_agreement.sh; the engine name and its platform statistics may differ."""
import json
import sys

IGNORED = {"engine", "platform_hosts", "platform_links"}


def walk(a, b, path, bad):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in IGNORED:
                continue
            if k not in a or k not in b:
                bad.append(f"{path}/{k}: only in one summary")
                continue
            walk(a[k], b[k], f"{path}/{k}", bad)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            bad.append(f"{path}: {len(a)} vs {len(b)} entries")
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{path}[{i}]", bad)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if abs(a - b) > 1e-9 * max(abs(a), abs(b), 1e-6):
            bad.append(f"{path}: {a!r} vs {b!r}")
    elif a != b:
        bad.append(f"{path}: {a!r} vs {b!r}")


def main():
    a, b = (json.load(open(p)) for p in sys.argv[1:3])
    name = sys.argv[3] if len(sys.argv) > 3 else sys.argv[2]
    bad = []
    walk(a, b, "", bad)
    if bad:
        print(f"FAIL {name}: {len(bad)} differences, first: " + "; ".join(bad[:5]))
        return 1
    print(f"ok  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
