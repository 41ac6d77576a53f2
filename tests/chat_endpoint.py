"""A local OpenAI-compatible endpoint for the LLM-backend tests (metacog, Webscale-RL, MGA): each test
subclasses ``JSONHandler`` with its own ``do_POST`` (or ``RecordingHandler`` with its ``reply``) and serves
it with ``serving``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


class JSONHandler(BaseHTTPRequestHandler):
    """A quiet request handler with helpers to read the JSON body and send a JSON reply."""

    def json_body(self) -> dict[str, Any]:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def send_json(self, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_error_status(self, status: int = 500) -> None:
        self.send_response(status)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


class RecordingHandler(JSONHandler):
    """Records every request body in ``bodies`` and answers ``reply(body)``; ``fail_next = True`` makes the
    next request a server error (to test retries and resumption). Serve it with ``recording``."""

    bodies: list[dict[str, Any]] = []
    fail_next = False

    def reply(self, body: dict[str, Any]) -> Any:
        raise NotImplementedError

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.json_body()
        handler = type(self)
        handler.bodies.append(body)
        if handler.fail_next:
            handler.fail_next = False
            self.send_error_status()
            return
        self.send_json(self.reply(body))


@contextmanager
def recording(handler: type[RecordingHandler]) -> Iterator[str]:
    """``serving`` with the handler's record emptied and no failure pending."""
    handler.bodies, handler.fail_next = [], False
    with serving(handler) as url:
        yield url


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free local port in a thread; yields the base URL (``.../v1``)."""
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
