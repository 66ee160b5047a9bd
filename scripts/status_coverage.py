"""Checks that every status code openapi.yaml documents for an operation was answered by some
test: the integration tests' servers and the schemathesis run each leave the (method, route,
status) triples they answered in one directory (UPCOMMIT_STATUS_COVERAGE_DIR).

usage: python status_coverage.py openapi.yaml DIR
Exit 1 listing every documented (method, path, status) no test reached, or any answered
(method, route, status) the spec does not document."""
import pathlib
import sys

import yaml

METHODS = {"get", "put", "post", "delete", "patch"}


def main():
    spec = yaml.safe_load(open(sys.argv[1]))
    documented = set()
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                for status in op["responses"]:
                    documented.add((method.upper(), path, str(status)))
    observed = set()
    files = list(pathlib.Path(sys.argv[2]).glob("*.txt"))
    for f in files:
        for line in f.read_text().splitlines():
            method, route, status = line.split(" ")
            observed.add((method, route, status))
    unreached = sorted(documented - observed)
    # Fallback answers (unmatched routes) and wrong methods are the router's, not an operation's.
    undocumented = sorted(
        o for o in observed - documented
        if o[1] != "unmatched" and (o[0], o[1]) in {(d[0], d[1]) for d in documented}
    )
    print(f"status coverage: {len(documented) - len(unreached)}/{len(documented)} documented "
          f"(method, path, status) reached, from {len(files)} servers")
    for m, p, s in unreached:
        print(f"  unreached:    {m} {p} {s}")
    for m, p, s in undocumented:
        print(f"  undocumented: {m} {p} {s}")
    sys.exit(1 if unreached or undocumented else 0)


main()
