#!/usr/bin/env python3
"""Decode vantage single-object Avro messages with fastavro, independently of
the TypeScript encoder, and print one JSON object per message (JSON Lines).

Wire shape checked here (Avro spec, single-object encoding):
    C3 01 | CRC-64-AVRO(Parsing Canonical Form of writer schema), 8 bytes LE | Avro binary body

The writer schema is chosen by the fingerprint, computed here by fastavro
from the .avsc files (not taken from our code). u64 values (fixed(8) with
logicalType "vantage-u64", big-endian) are printed as decimal strings; any
other bytes/fixed as hex.

Usage:
    decode_with_fastavro.py --schemas DIR FILE...      one message per file
    decode_with_fastavro.py --schemas DIR --base64-lines < messages.b64
                                                        one base64 message per line
    decode_with_fastavro.py --schemas DIR --canonical   print each schema's
                                                        canonical form and fingerprint

Output per message: {"source", "ok": true, "schema", "fingerprint", "value"}
or {"source", "ok": false, "reason"}. Exit status 0 even when messages are
rejected (the caller compares outputs); 2 on usage errors.
"""
import argparse
import base64
import datetime
import io
import json
import os
import sys

from fastavro import schemaless_reader
from fastavro.schema import fingerprint, load_schema, to_parsing_canonical_form

MARKER = b"\xc3\x01"
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
U64_LOGICAL = "vantage-u64"


def load_registry(schema_dir):
    registry = {}
    for name in sorted(os.listdir(schema_dir)):
        if not name.endswith(".avsc"):
            continue
        with open(os.path.join(schema_dir, name), encoding="utf-8") as f:
            raw = json.load(f)
        parsed = load_schema(os.path.join(schema_dir, name))
        canonical = to_parsing_canonical_form(parsed)
        fp = fingerprint(canonical, "CRC-64-AVRO")  # hex of the 8 LE bytes
        registry[fp] = {"file": name, "raw": raw, "parsed": parsed, "canonical": canonical}
    return registry


def collect_named(schema, named, namespace=None):
    """Index every named type in a raw schema by full and short name."""
    if isinstance(schema, list):
        for branch in schema:
            collect_named(branch, named, namespace)
        return
    if not isinstance(schema, dict):
        return
    ns = schema.get("namespace", namespace)
    if "name" in schema and schema.get("type") in ("record", "error", "enum", "fixed"):
        short = schema["name"]
        full = short if "." in short or not ns else ns + "." + short
        named[full] = schema
        named[short] = schema
    for field in schema.get("fields", []):
        collect_named(field["type"], named, ns)
    for key in ("items", "values"):
        if key in schema:
            collect_named(schema[key], named, ns)
    if isinstance(schema.get("type"), (dict, list)):
        collect_named(schema["type"], named, ns)


def to_json(schema, value, named):
    """Convert a fastavro value to JSON-safe form, guided by the raw schema."""
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    if isinstance(schema, list):
        if value is None:
            return None
        # Our unions are [null, X]: pick the non-null branch that fits.
        for branch in schema:
            if branch == "null":
                continue
            return to_json(branch, value, named)
        return value
    if isinstance(schema, dict):
        t = schema.get("type")
        if isinstance(t, (dict, list)):
            return to_json(t, value, named)
        if t in ("record", "error"):
            return {f["name"]: to_json(f["type"], value[f["name"]], named) for f in schema["fields"]}
        if t == "array":
            return [to_json(schema["items"], v, named) for v in value]
        if t == "map":
            return {k: to_json(schema["values"], v, named) for k, v in value.items()}
        if t == "fixed":
            if schema.get("logicalType") == U64_LOGICAL:
                return str(int.from_bytes(value, "big", signed=False))
            return value.hex()
        if t == "bytes":
            return value.hex()
        if isinstance(value, datetime.datetime):
            # fastavro applies timestamp-millis; print epoch ms, as written.
            return (value - EPOCH) // datetime.timedelta(milliseconds=1)
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return value


def decode(data, registry):
    if len(data) < 2:
        return {"ok": False, "reason": "truncated: shorter than marker"}
    if data[:2] != MARKER:
        return {"ok": False, "reason": "bad marker " + data[:2].hex()}
    if len(data) < 10:
        return {"ok": False, "reason": "truncated: shorter than header"}
    fp = data[2:10].hex()
    entry = registry.get(fp)
    if entry is None:
        return {"ok": False, "reason": "unknown fingerprint " + fp}
    body = io.BytesIO(data[10:])
    try:
        value = schemaless_reader(body, entry["parsed"], None)
    except Exception as exc:  # noqa: BLE001 - any decode failure is a rejection
        return {"ok": False, "reason": "malformed: %s" % exc}
    if body.tell() != len(data) - 10:
        return {"ok": False, "reason": "trailing bytes: %d" % (len(data) - 10 - body.tell())}
    named = {}
    collect_named(entry["raw"], named)
    return {"ok": True, "schema": entry["file"], "fingerprint": fp, "value": to_json(entry["raw"], value, named)}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schemas", required=True, help="directory of .avsc files")
    ap.add_argument("--base64-lines", action="store_true", help="read base64 messages, one per line, from stdin")
    ap.add_argument("--canonical", action="store_true", help="print canonical form and fingerprint of each schema")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args(argv)
    registry = load_registry(args.schemas)
    out = sys.stdout
    if args.canonical:
        for fp, entry in registry.items():
            out.write(json.dumps({"schema": entry["file"], "canonical": entry["canonical"], "fingerprint": fp}, ensure_ascii=False) + "\n")
        return 0
    if args.base64_lines:
        for n, line in enumerate(sys.stdin, 1):
            line = line.strip()
            if not line:
                continue
            result = decode(base64.b64decode(line), registry)
            out.write(json.dumps({"source": "line %d" % n, **result}, ensure_ascii=False) + "\n")
        return 0
    for path in args.files:
        with open(path, "rb") as f:
            result = decode(f.read(), registry)
        out.write(json.dumps({"source": path, **result}, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
