"""An HTTP server for the uploader's tests, on 127.0.0.1 (python3 only).

    python3 upload_server.py PORT LOG

The request path scripts the answers, per Idempotency-Key: `/fail/N/STATUS[/RETRY-AFTER]` answers
STATUS (with Retry-After when given) to the first N requests of a key and 201 after; `/status/S`
always answers S; `/reset` closes the connection after reading part of the body; `/stall` never
answers. Every request is appended to LOG as one JSON line: path, key, attempt header, bytes, the
answer. The port is printed on stdout once listening (0 picks a free one).
"""
import json
import os
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

counts = {}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self, answer, length):
        entry = {"path": self.path, "key": self.headers.get("Idempotency-Key"),
                 "attempt": self.headers.get("Logbook-Attempt"), "bytes": length, "answer": answer}
        with lock, open(sys.argv[2], "a") as log:
            log.write(json.dumps(entry) + "\n")

    def answer(self, status, retry_after=None):
        self.send_response(status)
        if retry_after is not None:
            self.send_header("Retry-After", urllib.parse.unquote(retry_after))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_PUT(self):
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        length = int(self.headers.get("Content-Length", 0))
        if parts[:1] == ["reset"]:
            self.rfile.read(min(length, 65536))
            self.record("reset", length)
            # Lost mid-body: no answer, and the rest of the body is never read as a request.
            # (socket.close() would wait for rfile/wfile to let go; shutdown ends it now.)
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if parts[:1] == ["stall"]:
            self.record("stall", length)
            time.sleep(30)
            return
        body = self.rfile.read(length)
        key = self.headers.get("Idempotency-Key")
        with lock:
            counts[key] = counts.get(key, 0) + 1
            seen = counts[key]
        if parts[:1] == ["fail"] and seen <= int(parts[1]):
            self.record(int(parts[2]), len(body))
            self.answer(int(parts[2]), parts[3] if len(parts) > 3 else None)
        elif parts[:1] == ["status"]:
            self.record(int(parts[1]), len(body))
            self.answer(int(parts[1]))
        else:
            self.record(201, len(body))
            self.answer(201)

    do_POST = do_PUT


def exit_with_the_test():
    """The test holds our stdin: when it closes it (or dies), we go too; no server outlives it."""
    sys.stdin.read()
    os._exit(0)


threading.Thread(target=exit_with_the_test, daemon=True).start()
server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
