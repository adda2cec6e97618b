#!/usr/bin/env python3
"""An OTLP/HTTP logs receiver for the exporter's tests, on 127.0.0.1 (python3 with
opentelemetry-proto and protobuf).

    python3 otlp_server.py PORT LOG

Every body is parsed with the official definitions into an ExportLogsServiceRequest, by its
Content-Type: application/x-protobuf with ParseFromString, application/json with json_format.Parse
(unknown fields refused); a body that does not parse, or another Content-Type, is answered 400.
The path scripts the answers: `/s/A,B,C/v1/logs` answers the first request on that path with A,
the second with B..., then 200. Answers: `ok` (200 `{}`), `partialN` (200 with N rejected records
and a message), `503raN` (503 with Retry-After: N), `429`, `502`, `400` (a google.rpc.Status with a
message), `500`, `reset` (closes the connection after reading part of the body). `/slow/MS/v1/logs`
answers every request 200 after MS milliseconds; `/max/BYTES/v1/logs` answers 413 to a body
larger than BYTES (as sent) and 200 to the others; `/hold/v1/logs` answers 200 once the file LOG.release
exists (a test releases it when it has seen what it waits for: no timing); `/holdbody/TEXT/v1/logs`
holds so only the request carrying a record whose body is TEXT (percent-encoded), and answers the
others at once; `/discard` reads and answers 200 without parsing or
logging (for benchmarks). Each request is
appended to LOG as a JSON line: path, attempt header, whether it parsed, its records (time, body,
severity), the Content-Encoding (gzip and zstd bodies are decompressed first), the bytes received, the
answer and the Content-Type. The port is printed once listening (0 picks a free one); the server
exits when its stdin closes.
"""
import json
import urllib.parse
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2

counts = {}
lock = threading.Lock()



def zstd_decompress(frame):
    """One zstd frame with its content size, through the system's libzstd (no PyPI package)."""
    import ctypes
    library = ctypes.CDLL("libzstd.so.1")
    library.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
    library.ZSTD_decompress.restype = ctypes.c_size_t
    library.ZSTD_isError.restype = ctypes.c_uint
    size = library.ZSTD_getFrameContentSize(frame, ctypes.c_size_t(len(frame)))
    if size >= 2**63:
        raise ValueError("a zstd frame without its content size")
    out = ctypes.create_string_buffer(max(1, size))
    written = library.ZSTD_decompress(out, ctypes.c_size_t(size), frame, ctypes.c_size_t(len(frame)))
    if library.ZSTD_isError(written) or written != size:
        raise ValueError("a damaged zstd frame")
    return out.raw[:size]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"{}", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        path = self.path
        action = "ok"
        if path.startswith("/slow/"):
            action = "slow" + path.split("/")[2]
        elif path.startswith("/hold/"):
            action = "hold"
        elif path.startswith("/holdbody/"):
            action = "holdbody"
        elif path.startswith("/max/"):
            action = "max" + path.split("/")[2]
        elif path.startswith("/s/"):
            script = path.split("/")[2].split(",")
            with lock:
                n = counts.get(path, 0)
                counts[path] = n + 1
            if n < len(script):
                action = script[n]
        length = int(self.headers.get("Content-Length", "0"))
        if path.startswith("/discard"):  # benchmarks: read, answer, nothing else
            self.rfile.read(length)
            self.answer(200)
            return
        if action == "reset":
            self.rfile.read(min(length, 100))
            # Logged before the connection goes, so that the client's retry is always logged after it.
            record(path, self.headers.get("Logbook-Attempt"), None, [], "reset", "", length)
            # Lost mid-body: no answer. (close() would wait for rfile/wfile; shutdown ends it now.)
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        body = self.rfile.read(length)
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            import gzip
            body = gzip.decompress(body)
        elif encoding == "zstd":
            body = zstd_decompress(body)
        request = logs_service_pb2.ExportLogsServiceRequest()
        content_type = self.headers.get("Content-Type", "")
        try:
            if content_type == "application/x-protobuf":
                if request.ParseFromString(body) != len(body):
                    raise ValueError("the protobuf body was not read to its end")
            elif content_type == "application/json":
                json_format.Parse(body.decode("utf-8"), request, ignore_unknown_fields=False)
            else:
                raise ValueError(f"Content-Type {content_type!r} is neither OTLP encoding")
            parsed = True
        except Exception as error:  # noqa: BLE001 - any failure is the client's
            parsed = False
            action = "invalid"
            message = str(error)
        if action == "holdbody":  # hold the request that carries the record of that body
            wanted = urllib.parse.unquote(path.split("/")[2])
            action = "hold" if parsed and any(
                r.body.string_value == wanted for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records) else "ok"
        if action.startswith("max"):  # a collector's body limit: larger bodies are answered 413
            action = "413" if length > int(action[len("max"):]) else "ok"
        records = [
            {"time": r.time_unix_nano, "severity": r.severity_number, "body": r.body.string_value}
            for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records
        ] if parsed and action != "413" else []
        record(path, self.headers.get("Logbook-Attempt"), parsed, records, action, encoding, length, content_type)
        if action == "ok":
            self.answer(200)
        elif action.startswith("slow"):
            import time
            time.sleep(int(action[len("slow"):]) / 1000)
            self.answer(200)
        elif action == "hold":
            import os
            import time
            while not os.path.exists(sys.argv[2] + ".release"):
                time.sleep(0.005)
            self.answer(200)
        elif action.startswith("partial"):
            n = int(action[len("partial"):])
            self.answer(200, json.dumps({"partialSuccess": {"rejectedLogRecords": str(n), "errorMessage": "too old"}}).encode())
        elif action.startswith("503ra"):
            self.answer(503, b"{}", [("Retry-After", action[len("503ra"):])])
        elif action == "400":
            self.answer(400, json.dumps({"code": 3, "message": "attribute key too long"}).encode())
        elif action == "invalid":
            self.answer(400, json.dumps({"code": 3, "message": "not an ExportLogsServiceRequest: " + message}).encode())
        else:
            self.answer(int(action))


def record(path, attempt, parsed, records, answer, encoding, length, content_type=None):
    with lock:
        with open(sys.argv[2], "a") as log:
            log.write(json.dumps({"path": path, "attempt": attempt, "parsed": parsed, "records": records, "answer": answer,
                                  "encoding": encoding, "bytes": length, "contentType": content_type}) + "\n")


server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
