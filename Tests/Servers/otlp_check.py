#!/usr/bin/env python3
"""Parses an OTLP/HTTP JSON body (stdin) with the official OpenTelemetry protobuf definitions
(PyPI's opentelemetry-proto) into an ExportLogsServiceRequest, refusing unknown fields, and prints
what it holds as JSON lines, one per record: resource attributes, scope, and every field with the
type the protobuf message gives it. Exits 1 with the parser's message if the body is not valid."""
import json
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2


def any_value(value):
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return ["array", [any_value(v) for v in value.array_value.values]]
    if kind == "kvlist_value":
        return ["kvlist", {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}]
    if kind == "bytes_value":
        return ["bytes", value.bytes_value.hex()]
    return [kind.replace("_value", ""), getattr(value, kind)]


def main():
    request = logs_service_pb2.ExportLogsServiceRequest()
    try:
        json_format.Parse(sys.stdin.read(), request, ignore_unknown_fields=False)
    except json_format.ParseError as error:
        print(f"not a valid ExportLogsServiceRequest: {error}", file=sys.stderr)
        sys.exit(1)
    for resource_logs in request.resource_logs:
        resource = {kv.key: any_value(kv.value) for kv in resource_logs.resource.attributes}
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                print(json.dumps({
                    "resource": resource,
                    "scope": scope_logs.scope.name,
                    "time": record.time_unix_nano,
                    "observed": record.observed_time_unix_nano,
                    "severityNumber": record.severity_number,
                    "severityText": record.severity_text,
                    "body": any_value(record.body),
                    "attributes": {kv.key: any_value(kv.value) for kv in record.attributes},
                    "attributeKeys": [kv.key for kv in record.attributes],
                }))


main()
