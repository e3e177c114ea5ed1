"""Checks that baton's journal (its --json event stream) holds exactly the usage numbers the
model server reported, call by call: equal numbers where the server reported usage, and `null`
(unknown, not zero) where it reported none."""
import json
import sys

events_path, proxy_log_path = sys.argv[1], sys.argv[2]
require_reported = "--require-reported" in sys.argv[3:]
journaled = []
for line in open(events_path, encoding="utf-8"):
    event = json.loads(line)
    assert event["v"] == 1, f"unexpected schema version in {line!r}"
    if event["type"] == "model_call_finished":
        journaled.append(event["usage"])
reported = [json.loads(line)["usage"] for line in open(proxy_log_path, encoding="utf-8")]

assert journaled, "baton journaled no finished model call"
assert len(journaled) == len(reported), f"{len(journaled)} calls journaled, {len(reported)} answered by the server"
for i, (ours, theirs) in enumerate(zip(journaled, reported), 1):
    if theirs is None:
        assert not require_reported, f"call {i}: the server reported no usage"
        assert ours is None, f"call {i}: the server reported no usage but baton journaled {ours}"
        continue
    assert ours is not None, f"call {i}: the server reported usage but baton journaled none"
    assert theirs["prompt_tokens"] > 0, f"call {i}: server reported no prompt tokens"
    assert ours["prompt_tokens"] == theirs["prompt_tokens"], f"call {i}: prompt {ours} != {theirs}"
    assert ours["completion_tokens"] == theirs["completion_tokens"], f"call {i}: completion {ours} != {theirs}"
    cached = (theirs.get("prompt_tokens_details") or {}).get("cached_tokens")
    assert ours.get("cached_prompt_tokens") == cached, f"call {i}: cached {ours} != {theirs}"
print(f"usage check: {len(journaled)} model calls, journal matches the server: "
      + ", ".join(f"{u['prompt_tokens']}+{u['completion_tokens']}" if u else "unreported" for u in journaled))
