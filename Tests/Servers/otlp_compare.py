#!/usr/bin/env python3
"""Parses an OTLP/HTTP JSON body and an OTLP/HTTP protobuf body of the same records with the
official OpenTelemetry definitions (PyPI's opentelemetry-proto; JSON with unknown fields refused,
protobuf with ParseFromString; OTLP's hex traceId and spanId read as the bytes they name) and
compares the two messages field by field. With a third argument, prints each record's trace_id,
span_id (hex) and flags, one line each.

    python3 otlp_compare.py BODY.json BODY.pb

Prints the number of records and exits 0 when they are equal; exits 1 with the first difference
(or the parser's message) otherwise."""
import base64
import json
import sys

from google.protobuf import json_format, text_format
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2


def ids_as_base64(request):
    """OTLP's JSON writes traceId and spanId in hex, where protobuf's JSON mapping (json_format)
    wants base64: converted, so that the official parser reads the bytes the encoder meant."""
    for resource_logs in request.get("resourceLogs", []):
        for scope_logs in resource_logs.get("scopeLogs", []):
            for record in scope_logs.get("logRecords", []):
                for field in ("traceId", "spanId"):
                    if field in record:
                        record[field] = base64.b64encode(bytes.fromhex(record[field])).decode()
    return request


def main():
    from_json = logs_service_pb2.ExportLogsServiceRequest()
    from_protobuf = logs_service_pb2.ExportLogsServiceRequest()
    try:
        with open(sys.argv[1], "rb") as body:
            json_format.ParseDict(ids_as_base64(json.loads(body.read())), from_json, ignore_unknown_fields=False)
        with open(sys.argv[2], "rb") as body:
            data = body.read()
            if from_protobuf.ParseFromString(data) != len(data):
                raise ValueError("the protobuf body was not read to its end")
    except Exception as error:  # a parser's message, whichever body it was
        print(f"not a valid ExportLogsServiceRequest: {error}", file=sys.stderr)
        sys.exit(1)
    if from_json != from_protobuf:
        a = text_format.MessageToString(from_json).splitlines()
        b = text_format.MessageToString(from_protobuf).splitlines()
        for index, (x, y) in enumerate(zip(a, b)):
            if x != y:
                print(f"line {index}: JSON {x!r} != protobuf {y!r}", file=sys.stderr)
                break
        else:
            print(f"lengths differ: {len(a)} and {len(b)} lines", file=sys.stderr)
        sys.exit(1)
    records = [r for rl in from_protobuf.resource_logs for sl in rl.scope_logs for r in sl.log_records]
    print(len(records))
    if len(sys.argv) > 3:
        for record in records:
            keys = ",".join(kv.key for kv in record.attributes)
            print(f"{record.trace_id.hex()} {record.span_id.hex()} {record.flags} {keys}")


main()
