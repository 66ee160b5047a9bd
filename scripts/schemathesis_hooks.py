"""Loaded by scripts/conformance.sh through SCHEMATHESIS_HOOKS.

schemathesis 4.32.5 scans every 2xx JSON body for strings that look like same-origin links and
calls `urllib.parse.urlsplit` on each one that starts with `http://` or `https://`. A string
such as `http://[x` (a filename an upload was given, echoed in the answer) makes `urlsplit`
raise "Invalid IPv6 URL", which schemathesis does not catch: the whole run ends with an internal
error instead of a verdict. Such a string is not a link; here it counts as none. Nothing else of
schemathesis changes (its checks, generation and verdicts are untouched).
"""

import schemathesis.engine.observations as observations

_same_origin_path = observations._same_origin_path


def _tolerant_same_origin_path(value, origin):
    try:
        return _same_origin_path(value, origin)
    except ValueError:
        return None


observations._same_origin_path = _tolerant_same_origin_path
