#!/usr/bin/env python3
"""Follow latency at the receiver: reads the bodies Benchmarks/Upload/sink.c saved (arrival u64 ns,
length u32, OTLP protobuf body), parses each with the official opentelemetry-proto definitions,
and prints, over every record, the time from its timestamp to the arrival of the request that
carried it: count, p50, p99 and the largest, in milliseconds.
Usage: follow_latency.py SAVED [EXPECTED_RECORDS]"""
import struct
import sys

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

latencies = []
with open(sys.argv[1], "rb") as saved:
    while True:
        head = saved.read(12)
        if len(head) < 12:
            break
        arrival, length = struct.unpack("<QI", head)
        request = ExportLogsServiceRequest()
        request.ParseFromString(saved.read(length))
        for resource in request.resource_logs:
            for scope in resource.scope_logs:
                for record in scope.log_records:
                    latencies.append((arrival - record.time_unix_nano) / 1e6)
latencies.sort()
count = len(latencies)
if count == 0:
    sys.exit("no records arrived")


def percentile(p):
    return latencies[min(count - 1, int(count * p / 100))]


print(f"records {count}, latency ms: p50 {percentile(50):.0f}, p99 {percentile(99):.0f}, max {latencies[-1]:.0f}")
if len(sys.argv) > 2 and count != int(sys.argv[2]):
    sys.exit(f"{count} records arrived, {sys.argv[2]} were written")
