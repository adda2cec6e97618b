"""An HTTP server for the uploader's tests, on 127.0.0.1 (python3 only).

    python3 upload_server.py PORT LOG [BODIES]

The request path scripts the answers, per Idempotency-Key: `/fail/N/STATUS[/RETRY-AFTER]` answers
STATUS (with Retry-After when given) to the first N requests of a key and 201 after; `/status/S`
always answers S; `/reset` closes the connection after reading part of the body; `/stall` never
answers; `/reset-once` resets each key's first request, then answers 201; `/hold` answers 201 once the file
LOG.release exists (a test makes it when it has done what it must do while the request waits: no
timing); `/flaky` fails a third of all requests at random (half 503, half a reset mid-body) and reads
bodies at about 2 MB/s;
`/redirect/S` answers S with Location: /ok/redirected; `/discard` reads the body in pieces and
answers 204 (for benchmarks); `/resumable-stuck` offers a resumable upload (a 104 with an upload
URL under /upload/) and answers 503, and that upload never moves: HEAD says offset 0, PATCH
answers 409.

Resumable uploads that the server keeps (a 104 with Location /upload/N, then HEAD /upload/N says
the offset kept, and PATCH at that offset appends; the upload completes with 201):
`/resumable-half/...` keeps the first half of the body it reads whole, then answers 503 with
Retry-After: 3600; `/resumable-trickle/...` keeps 1 byte of each PUT and PATCH, then resets the
connection; `/resumable-eighth/...` keeps an eighth of what remains (at least 1 byte) of each,
then resets. `/resumable-location/QUOTED` sends a 104 whose Location is QUOTED percent-decoded
into raw bytes (no check: a hostile server), then reads the body and answers 201.

Answers whose head is too large for a client to read (over 100 KiB): `/bighead/STATUS/line` answers
STATUS with one header line of 200 KB, `/bighead/STATUS/lines` with 300 header lines of 1 KB; for
STATUS 104, a request that offers a resumable upload gets a 104 so made (its Location 200 KB long,
or 300 lines of 1 KB) before its body is read, then a 201, and any other request a 201.

Answers that trickle, forever (only the client's bound ends them): `/trickle/body` answers 201
with a body of 1 TB, one byte every 0.1 s; `/trickle/head` sends its head one byte every 0.1 s;
`/trickle/interim` sends a 104 every 0.1 s.

Every request is appended to LOG as one JSON line: path, key, attempt header, Authorization
header, bytes, the SHA-256 of the body, the answer.
As soon as its headers are read, each request also appends its path to LOG.arrivals (so that a test
can act once an upload began, instead of after a time).
With BODIES, each 2xx body is stored there under its key. The port is printed on stdout once
listening (0 picks a free one).
"""
import hashlib
import io
import json
import random
import os
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

counts = {}
lock = threading.Lock()
uploads = {}  # resumable uploads kept: number -> {"mode", "length", "kept": bytes}


def key_of(handler):
    return handler.headers.get("Idempotency-Key")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self, answer, length, body=None):
        entry = {"path": self.path, "key": self.headers.get("Idempotency-Key"),
                 "attempt": self.headers.get("Logbook-Attempt"), "bytes": length, "answer": answer,
                 "authorization": self.headers.get("Authorization")}
        if body is not None:
            entry["sha256"] = hashlib.sha256(body).hexdigest()
            if len(sys.argv) > 3 and 200 <= answer < 300 and entry["key"]:
                name = entry["key"].strip('"').replace("/", "_")
                with open(os.path.join(sys.argv[3], name), "wb") as stored:
                    stored.write(body)
        with lock, open(sys.argv[2], "a") as log:
            log.write(json.dumps(entry) + "\n")

    def answer(self, status, retry_after=None):
        self.send_response(status)
        if retry_after is not None:
            self.send_header("Retry-After", urllib.parse.unquote(retry_after))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def read_body(self, length, slowly=False):
        """The whole body, or None when the client went away before sending it all (as a real
        server would, such a request is never answered, let alone accepted). `slowly` reads
        64 KiB every 30 ms (about 2 MB/s), so that a kill lands in the middle of a large body."""
        if slowly:
            pieces = []
            left = length
            while left > 0:
                piece = self.rfile.read(min(left, 65536))
                if not piece:
                    break
                pieces.append(piece)
                left -= len(piece)
                time.sleep(0.03)
            body = b"".join(pieces)
        else:
            body = self.rfile.read(length)
        if len(body) < length:
            self.record("short", len(body))
            self.close_connection = True
            return None
        return body

    def reset(self, length, part=65536):
        self.rfile.read(min(length, part))
        self.record("reset", length)
        # Lost mid-body: no answer, and the rest of the body is never read as a request.
        # (socket.close() would wait for rfile/wfile to let go; shutdown ends it now.)
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        self.connection.shutdown(socket.SHUT_RDWR)

    def kept_upload(self):
        """The resumable upload kept at /upload/N, or None (the stuck one, or unknown)."""
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if parts[:1] == ["upload"] and len(parts) == 2 and parts[1].isdigit():
            with lock:
                return uploads.get(int(parts[1]))
        return None

    def do_HEAD(self):
        upload = self.kept_upload()
        self.record("head", 0)
        self.send_response(204)
        self.send_header("Upload-Draft-Interop-Version", "6")
        self.send_header("Upload-Offset", str(len(upload["kept"])) if upload else "0")
        self.send_header("Upload-Complete", "?0")
        self.end_headers()

    def keep_part(self, upload, length, creating=False):
        """Reads a body of `length` bytes (the creation's, or an append's) and keeps what the
        upload's mode says, then answers or resets."""
        left = upload["length"] - len(upload["kept"])
        if upload["mode"] == "half" and creating:
            body = self.read_body(length)
            if body is None:
                return
            upload["kept"] += body[:max(0, upload["length"] // 2 - len(upload["kept"]))]
            self.record(503, length, body)
            self.answer(503, "3600")
            return
        keep = {"half": length, "trickle": 1}.get(upload["mode"], max(1, (left + 7) // 8))
        if keep >= length:
            body = self.read_body(length)
            if body is None:
                return
            upload["kept"] += body
            if len(upload["kept"]) == upload["length"]:
                self.record(201, length, upload["kept"])
                self.answer(201)
                return
            self.record(204, length)
            self.answer(204)
            return
        upload["kept"] += self.rfile.read(keep)  # then lost mid-body
        self.record("reset", length)
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        self.connection.shutdown(socket.SHUT_RDWR)

    def do_PATCH(self):
        length = int(self.headers.get("Content-Length", 0))
        upload = self.kept_upload()
        if upload is not None and self.headers.get("Upload-Offset") == str(len(upload["kept"])):
            self.keep_part(upload, length)
            return
        self.record(409, length)
        self.send_response(409)
        self.send_header("Upload-Draft-Interop-Version", "6")
        self.send_header("Upload-Offset", "0")
        self.send_header("Content-Length", "0")
        self.close_connection = True
        self.end_headers()

    def interim(self, location):
        """A 104 with `location` as raw bytes, flushed before the body is read."""
        self.wfile.write(b"HTTP/1.1 104 Upload Resumption Supported\r\nUpload-Draft-Interop-Version: 6\r\n"
                         b"Location: " + location + b"\r\n\r\n")
        self.wfile.flush()

    def trickle(self, what, length):
        """An answer that never ends, one byte every 0.1 s: only the client's bound stops it."""
        self.read_body(length)
        self.record("trickle-" + what, length)
        self.close_connection = True
        try:
            if what == "body":
                self.wfile.write(b"HTTP/1.1 201 Created\r\nContent-Length: 1000000000000\r\n\r\n")
                piece = b"x"
            elif what == "head":
                self.wfile.write(b"HTTP/1.1 201 Created\r\nX-Slow: ")
                piece = b"x"
            else:
                piece = b"HTTP/1.1 104 Upload Resumption Supported\r\n\r\n"
            while True:
                self.wfile.write(piece)
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass

    def big_head(self, status, shape, length, resumable):
        """An answer (or, for 104, an interim answer) whose head is over 100 KiB: one line of
        200 KB, or 300 lines of 1 KB."""
        name = "Location" if status == 104 else "X-Big"
        if shape == "line":
            fields = [(name, "/upload/" + "a" * 200_000)]
        else:
            fields = [(name if i == 0 else "X-Big-%d" % i, "/upload/" + "b" * 1000) for i in range(300)]
        head = b"".join(("%s: %s\r\n" % field).encode() for field in fields)
        if status == 104:
            if resumable:
                self.wfile.write(b"HTTP/1.1 104 Upload Resumption Supported\r\nUpload-Draft-Interop-Version: 6\r\n" + head + b"\r\n")
                self.wfile.flush()
            body = self.read_body(length)
            if body is None:
                return
            self.record(201, length, body)
            self.answer(201)
            return
        body = self.read_body(length)
        if body is None:
            return
        self.record(status, length, body)
        self.close_connection = True
        self.wfile.write(("HTTP/1.1 %d Big\r\n" % status).encode() + head + b"Content-Length: 0\r\n\r\n")

    def do_PUT(self):
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        length = int(self.headers.get("Content-Length", 0))
        if parts[:1] == ["resumable-stuck"] and self.headers.get("Upload-Draft-Interop-Version") == "6":
            # The 104, then the whole body read and a 503: the client has read the 104 before the
            # final answer (a reset could discard it unread), and retries.
            self.send_response_only(104)
            self.send_header("Upload-Draft-Interop-Version", "6")
            self.send_header("Location", "/upload/stuck")
            self.end_headers()
            self.wfile.flush()
            body = self.read_body(length)
            self.record(503, length, body)
            self.answer(503)
            return
        resumable = self.headers.get("Upload-Draft-Interop-Version") == "6"
        mode = parts[0][len("resumable-"):] if parts and parts[0].startswith("resumable-") else None
        if resumable and mode in ("half", "trickle", "eighth"):
            with lock:
                number = len(uploads) + 1
                upload = uploads[number] = {"mode": mode, "length": length, "kept": b""}
            self.interim(b"/upload/" + str(number).encode())
            self.keep_part(upload, length, creating=True)
            return
        if resumable and mode == "location":
            self.interim(urllib.parse.unquote_to_bytes(parts[1] if len(parts) > 1 else ""))
            body = self.read_body(length)
            if body is None:
                return
            self.record(201, length, body)
            self.answer(201)
            return
        if parts[:1] == ["bighead"] and len(parts) >= 3:
            self.big_head(int(parts[1]), parts[2], length, resumable)
            return
        if parts[:1] == ["trickle"]:
            self.trickle(parts[1] if len(parts) > 1 else "body", length)
            return
        with lock, open(sys.argv[2] + ".arrivals", "a") as arrivals:
            arrivals.write(self.path + "\n")
        if parts[:1] == ["discard"]:
            left = length
            while left > 0:
                piece = self.rfile.read(min(left, 1 << 20))
                if not piece:
                    break
                left -= len(piece)
            self.answer(204)
            return
        if parts[:1] == ["flaky"]:
            roll = random.random()
            if roll < 1 / 6:
                self.reset(length)
                return
            if roll < 1 / 3:
                body = self.read_body(length, slowly=True)
                if body is None:
                    return
                self.record(503, len(body), body)
                self.answer(503)
                return
        if parts[:1] == ["reset"]:
            self.reset(length)
            return
        if parts[:1] == ["reset-once"]:  # the first request of each key is reset mid-body, then 201
            with lock:
                counts[("reset", key_of(self))] = counts.get(("reset", key_of(self)), 0) + 1
                first = counts[("reset", key_of(self))] == 1
            if first:  # half the body read, then the connection closed with a RST (SO_LINGER 0)
                self.rfile.read(length // 2)
                self.record("reset", length)
                self.close_connection = True
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                for stream in (self.rfile, self.wfile):
                    try:
                        stream.close()
                    except OSError:
                        pass
                self.connection.close()
                self.wfile = io.BytesIO()  # finish() flushes it: nothing goes out
                return
        if parts[:1] == ["hold"]:  # then answers as /ok does
            while not os.path.exists(sys.argv[2] + ".release"):
                time.sleep(0.005)
        if parts[:1] == ["stall"]:
            self.record("stall", length)
            time.sleep(30)
            return
        body = self.read_body(length, slowly=parts[:1] == ["flaky"])
        if body is None:
            return
        key = self.headers.get("Idempotency-Key")
        with lock:
            counts[key] = counts.get(key, 0) + 1
            seen = counts[key]
        if parts[:1] == ["fail"] and seen <= int(parts[1]):
            self.record(int(parts[2]), len(body), body)
            self.answer(int(parts[2]), parts[3] if len(parts) > 3 else None)
        elif parts[:1] == ["redirect"]:
            self.record(int(parts[1]), len(body), body)
            self.send_response(int(parts[1]))
            self.send_header("Location", "/ok/redirected")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif parts[:1] == ["status"]:
            self.record(int(parts[1]), len(body), body)
            self.answer(int(parts[1]))
        else:
            self.record(201, len(body), body)
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
