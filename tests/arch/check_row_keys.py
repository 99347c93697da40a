#!/usr/bin/env python3
"""Every field the published-data JSON reader reads from a row is a known field.

validate/published/published_json.cpp refuses a row with a key outside check_row_keys' `known` set (a typo must not be
predicted as if it were absent). A key the mapper reads (opt_*(row, ctx, "key"), present(row, "key"), ...) but that is
missing from that set is refused before it is read: rows stating tp_comm_overlap, overlap_param_gather, stack or an FP8
recipe failed that way until 2026-12-05. Usage: check_row_keys.py PROJECT_ROOT; exit 1 naming the keys.
"""
import re
import sys

src = open(sys.argv[1] + "/validate/published/published_json.cpp", encoding="utf-8").read()
start = src.index("static const std::set<std::string> known = {")
known = set(re.findall(r'"([A-Za-z_0-9]+)"', src[start:src.index("};", start)]))
read = set(re.findall(r'\(row, (?:ctx, )?"([A-Za-z_0-9]+)"', src))
read |= set(re.findall(r'row\.(?:at|contains|value)\("([A-Za-z_0-9]+)"', src))
commentary = ("_note", "_source", "_detail")
missing = sorted(k for k in read - known if not k.endswith(commentary))
if missing:
    print("published_json.cpp reads row fields that check_row_keys refuses: " + ", ".join(missing))
    sys.exit(1)
print(f"check_row_keys: the {len(read)} row fields read are all known ({len(known)} known)")
