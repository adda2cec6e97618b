#!/usr/bin/env python3
"""Parses an OTLP/HTTP JSON body and an OTLP/HTTP protobuf body of the same records with the
official OpenTelemetry definitions (PyPI's opentelemetry-proto; JSON with unknown fields refused,
protobuf with ParseFromString) and compares the two messages field by field.

    python3 otlp_compare.py BODY.json BODY.pb

Prints the number of records and exits 0 when they are equal; exits 1 with the first difference
(or the parser's message) otherwise."""
import sys

from google.protobuf import json_format, text_format
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2


def main():
    from_json = logs_service_pb2.ExportLogsServiceRequest()
    from_protobuf = logs_service_pb2.ExportLogsServiceRequest()
    try:
        with open(sys.argv[1], "rb") as body:
            json_format.Parse(body.read(), from_json, ignore_unknown_fields=False)
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
    records = sum(len(s.log_records) for r in from_protobuf.resource_logs for s in r.scope_logs)
    print(records)


main()
